"""Any other CLI: the exit code plus the results file (D17). Its output is not parsed at all.

Turns are unknown, so nothing proves zero turns: no retry is ever licensed (D7 needs that proof),
and a success needs the forge's proof alone — a merged PR created after the start. A zero exit with
no PR is a no-op, never a success. A non-zero exit is ``other``; no text is ever read as a limit or
a revocation, so a plain agent never darkens a worker.
"""

from __future__ import annotations

from datetime import datetime

from fleet.agentkinds.kind import AgentKind
from fleet.agentkinds.report import AgentReport, ErrorClass
from fleet.runner.envelope import CaptureKind

KIND = AgentKind.PLAIN


def turn_flags(max_turns: int) -> tuple[str, ...]:
    del max_turns  # an unknown CLI has no known flag
    return ()


def read(output: str, exit_code: int | None, now: datetime) -> AgentReport:
    del now
    failed = exit_code not in (0, None)
    return AgentReport(
        agent=KIND,
        kind=CaptureKind.NOT_PARSED,
        turns=None,
        final_message="",
        cost_usd=None,
        tokens=None,
        error=ErrorClass.OTHER if failed else ErrorClass.NONE,
        reset_at=None,
        evidence=f"exit {exit_code}" if failed else "",
        detail=f"plain agent: exit {exit_code}, {len(output)} characters of output not parsed",
        is_error=failed,
    )
