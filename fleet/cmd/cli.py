"""The ``fleet`` console script: an invoke Program over the same collection as ``invoke`` finds
through the repository's ``tasks.py`` (``fleet.cmd.collection``), so ``fleet X`` and ``invoke X``
are one command."""

from __future__ import annotations

from invoke import Program

from fleet import __version__
from fleet.cmd.collection import ns

program = Program(namespace=ns, version=__version__, name="fleet", binary="fleet")
