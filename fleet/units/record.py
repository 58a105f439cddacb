"""The portable supervisor's wire: its unit record (one value type for both ends of its JSON) and
the codes of a start's answer.

The worker side (``python -m fleet.units``) writes the record to a name's state file and into its
start handshake and probe answers; the dispatcher side (``portable.py``) reads it back into a
``Unit``. It must load on the worker with nothing but the standard library and
``fleet.core.names``: the supervising process imports it on every claim, so the value types of
``fleet.core.model`` (the ``Unit`` included) stay on the dispatcher side.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from fleet.core.names import unit_name

# Exit codes of the worker's `start`, one per outcome (D20); stdout carries the same code in JSON.
START_EXITS: dict[str, int] = {
    "launched": 0,
    "held-live": 3,
    "held-finished": 4,
    "failed": 5,
}


def _count(value: object) -> int | None:
    """A JSON integer that is not a bool, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class UnitRecord(NamedTuple):
    """One held name as its supervisor describes it. ``state`` uses systemd's ActiveState words
    (``activating``, ``active``, ``deactivating``); ``result`` says why a deactivating unit ended.

    An immutable NamedTuple rather than the project's frozen dataclass: it is the one value type
    the supervising process defines, and ``dataclasses`` (with the ``inspect`` it imports) adds
    11 ms to a claim's 50-odd ms of start-up, against 3 ms for ``typing`` (min of 30 starts)."""

    issue: int
    state: str = "activating"  # held, not yet described: the holder is starting or just ending
    supervisor_pid: int | None = None
    pid: int | None = None
    start_us: int = 0  # CLOCK_MONOTONIC, µs: what oldest-wins repair orders by (D4)
    started_at: str | None = None  # wall clock, ISO 8601
    max_run_s: int | None = None
    result: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "issue": self.issue,
            "unit": unit_name(self.issue),
            "state": self.state,
            "supervisor_pid": self.supervisor_pid,
            "pid": self.pid,
            "start_us": self.start_us,
            "started_at": self.started_at,
            "max_run_s": self.max_run_s,
            "result": self.result,
        }

    @classmethod
    def from_json(cls, data: object) -> UnitRecord | None:
        """The record in ``data``; None when it is not a record or names no issue. A field that is
        missing or of the wrong type reads as unknown (its default), never as a guessed value."""
        if not isinstance(data, dict):
            return None
        issue = _count(data.get("issue"))
        if issue is None or issue <= 0:
            return None
        state = data.get("state")
        start_us = _count(data.get("start_us"))
        started_at = data.get("started_at")
        result = data.get("result")
        return cls(
            issue=issue,
            state=state if isinstance(state, str) and state else "activating",
            supervisor_pid=_count(data.get("supervisor_pid")),
            pid=_count(data.get("pid")),
            start_us=start_us if start_us is not None and start_us >= 0 else 0,
            started_at=started_at if isinstance(started_at, str) and started_at else None,
            max_run_s=_count(data.get("max_run_s")),
            result=result if isinstance(result, str) else None,
        )
