"""``replay TRACE``: thin I/O around :mod:`fleet.trace.replay` — read, replay, print, exit with its code."""

from __future__ import annotations

from pathlib import Path

from fleet.cmd.common import emit_json, fail
from fleet.core.exits import Exit
from fleet.trace import TraceError
from fleet.trace.replay import load_roles, replay_file


def replay(trace: str, as_json: bool) -> None:
    """0 every decision reproduced · 60 one differs · 59 unreadable trace · 58 nothing replayable."""
    notes = load_roles()
    try:
        report = replay_file(Path(trace), notes=notes)
    except TraceError as exc:
        raise fail(Exit.TRACE_UNREADABLE, f"replay: {exc}") from None
    if as_json:
        emit_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    code = report.exit()
    if code is not Exit.OK:
        raise fail(code, report.summary())
