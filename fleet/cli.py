"""The ``fleet`` console script: an invoke Program over the same collection as ``tasks.py``, so
``fleet X`` and ``invoke X`` are one command."""

from __future__ import annotations

from invoke import Program

import tasks
from fleet import __version__

program = Program(namespace=tasks.ns, version=__version__, name="fleet", binary="fleet")
