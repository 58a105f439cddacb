"""The files of one name under the portable supervisor's state directory, and who holds it.

``DIR/task-N.lock`` is the name (a kernel record lock, ``procs``); ``DIR/task-N.json`` the state
file, informative only: it counts while its writer holds the lock. Both the CLI (``__main__``:
start, probe, stop) and the supervising process (``supervise``) read and write them here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fleet.core.names import unit_name
from fleet.units import procs
from fleet.units.record import UnitRecord


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Paths:
    """The files of one name under the state directory."""

    def __init__(self, directory: str, issue: int) -> None:
        base = os.path.join(directory, unit_name(issue))
        self.lock = base + ".lock"
        self.state = base + ".json"
        self.log = base + ".log"
        self.result = base + ".result.json"
        self.stop = base + ".stop"


def write_json(path: str, data: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a record."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe_holder(paths: Paths, issue: int, holder: int) -> UnitRecord:
    """The unit record for a held name. The state file counts only if its writer holds the lock."""
    state = UnitRecord.from_json(read_json(paths.state))
    if state is not None and state.supervisor_pid == holder:
        return state
    start_us = procs.start_us_of(holder) if holder > 0 else 0
    return UnitRecord(issue, supervisor_pid=holder, start_us=start_us)
