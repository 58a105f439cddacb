"""invoke's entry point in this repository: ``invoke X`` finds this file. The collection itself is
``fleet.cmd.collection`` (shipped in the package; ``fleet X`` serves the same one)."""

from fleet.cmd.taskguard import keep_bytecode

keep_bytecode()  # before the collection's imports, so they are cached too

from fleet.cmd.collection import ns  # noqa: E402 (after the line above, on purpose)

__all__ = ["ns"]
