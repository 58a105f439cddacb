"""What every agent adapter returns: ONE value per run, whatever the CLI printed.

The close-out (run step 8) reads only this value, so D7's retry gate, D8's capacity file, D16's
zero-turn rule and D17's results file work the same for every kind, and the forge still decides the
outcome. Two rules every adapter keeps:

* **Turns unknown is never zero.** ``turns is None`` proves nothing (D20); only a CLI that reports
  its turns, or whose output proves the model was never reached, gives a number.
* **Capacity and revocation come only from where the CLI reports its own failures** — its error
  fields and its exit status — never from the model's free text (the final message, tool output),
  which a prompt injected through an issue can fill with any words. The raw evidence of the signal
  is kept, clipped, for the marker and the capacity file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fleet.agentkinds.kind import AgentKind
from fleet.core.model import CapacitySource, utc
from fleet.runner.capacity import LimitSignal
from fleet.runner.envelope import CaptureKind, json_objects, over_budget_detail

# A quote in a marker or a state file: enough to recognise, short enough for one status line.
EVIDENCE_CHARS = 300


class ErrorClass(StrEnum):
    NONE = "none"
    USAGE_LIMIT = "usage-limit"  # a provider quota, with its stated reset when there is one (D8)
    AUTH_REVOKED = "auth-revoked"  # the credential or entitlement is gone: no clock clears it
    OVERLOADED = "overloaded"  # a transient failure before the first turn (D7's candidate)
    OTHER = "other"  # any other failure, and every failure whose text is not documented


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 3] + "..."


@dataclass(frozen=True)
class AgentReport:
    """One run of one agent CLI, read once (D7: the retry gate and the outcome read this value)."""

    agent: AgentKind
    kind: CaptureKind  # how the output read: a result, none (zero turns), garbled, not parsed
    turns: int | None  # None = unknown, which is never read as zero
    final_message: str
    cost_usd: float | None
    tokens: int | None
    error: ErrorClass
    reset_at: datetime | None  # only with USAGE_LIMIT: the provider's stated reset, never invented
    evidence: str  # the CLI's own words or fields the error class rests on, clipped
    detail: str  # one line for the marker: what was read
    is_error: bool  # the CLI itself said the run failed
    api_error_status: int | None = None  # an HTTP status the CLI reported in an error field
    # A whole line of the capture reading as a limit notice beside a clean result: never enough to
    # darken a worker (it may be anyone's words), but enough not to heal one (D8 property 1).
    notice: str = ""

    @property
    def zero_turns(self) -> bool | None:
        """True = proven zero turns; None = could not check (D16, D20)."""
        return None if self.turns is None else self.turns == 0

    @property
    def limit(self) -> LimitSignal | None:
        """The capacity signal for D8's file, or None."""
        if self.error is ErrorClass.AUTH_REVOKED:
            return LimitSignal(CapacitySource.REVOKED, None, self.evidence)
        if self.error is ErrorClass.USAGE_LIMIT:
            return LimitSignal(CapacitySource.RATE_LIMIT, self.reset_at, self.evidence)
        return None

    def clean(self, exit_code: int | None) -> bool:
        """A run that may heal the worker's capacity file: exit 0 and no error the CLI reported
        (D8 property 1: a run ending on a trailing limit notice has error USAGE_LIMIT)."""
        return (
            exit_code == 0
            and self.error is ErrorClass.NONE
            and not self.is_error
            and not self.notice
        )


# The longest limit window a provider names (Claude Code's rate_limit_event: rateLimitType
# seven_day, docs/facts.md). A reset stated further out is not credible, and the words may be the
# model's own (Claude's limit form is plain result text): read as unknown, the worker waits for its
# canary (5 h) instead of staying dark until whatever year the text names.
MAX_RESET = timedelta(days=7)


def stated_reset(reset: datetime | None, now: datetime) -> tuple[datetime | None, str]:
    """A stated reset already past is not a recovery, and one beyond the longest provider window is
    not credible: either becomes unknown, and the note says so.

    A past reset would make the dispatcher treat a worker that just hit a limit as recovered, so a
    run could buy its issue a free rerun on the same worker at once; unknown keeps it dark until
    its canary (D8)."""
    if reset is None:
        return None, ""
    when = utc(reset).isoformat()
    if utc(reset) <= utc(now):
        return None, f" (stated reset {when} already past: read as unknown)"
    if utc(reset) - utc(now) > MAX_RESET:
        return None, f" (stated reset {when} beyond the longest provider window: read as unknown)"
    return reset, ""


def unreadable(agent: AgentKind, detail: str) -> AgentReport:
    """A capture that could not be read (garbled): turns unknown, a failure of class ``other``."""
    return AgentReport(
        agent,
        CaptureKind.GARBLED,
        None,
        "",
        None,
        None,
        ErrorClass.OTHER,
        None,
        detail,
        detail,
        True,
    )


# A JSON-printing CLI's reading of its capture: the top-level objects as (start, end, value), the
# text between them, and the exit code.
JsonReading = Callable[[list[tuple[int, int, Any]], list[str], int | None], AgentReport]


def json_reader(
    agent: AgentKind, reading: JsonReading
) -> Callable[[str, int | None, datetime], AgentReport]:
    """The adapter's ``read`` for a CLI that prints JSON and states no reset time: the capture is
    scanned once and handed to ``reading``; one that costs more than the scan's bound is
    unreadable (it proves nothing about turns)."""

    def read(output: str, exit_code: int | None, now: datetime) -> AgentReport:
        del now  # no reset time to read against the clock
        scanned = json_objects(output)
        if scanned is None:
            return unreadable(agent, over_budget_detail(output))
        objects, gaps = scanned
        return reading(objects, gaps, exit_code)

    return read
