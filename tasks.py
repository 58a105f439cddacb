"""invoke's entry point in this repository: ``invoke X`` finds this file. The collection itself is
``fleet.cmd.collection`` (shipped in the package; ``fleet X`` serves the same one)."""

from fleet.cmd.collection import ns

__all__ = ["ns"]
