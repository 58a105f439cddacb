"""What a dispatch answers, as values: a check's refusal and the one result per request.

A check returns a :class:`Refusal` or None instead of raising: the orchestration (``path``) then
reads as the seed's list of checks, and a batch can stop one request and go on with the rest
without unwinding anything. Each refusal carries its own exit code (D20), so ``echo $?`` and the
JSON object name the check that said no.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from enum import StrEnum

from fleet.core.exits import Exit
from fleet.core.model import Unit, unit_name


def new_run_id(now: float | None = None) -> str:
    """A run has an id; a unit does not: worktrees, traces and logs carry this, and a unit name is
    only ever the lock (``task-N``)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    # What secrets.token_hex(3) returns, without importing secrets (hmac, hashlib) into every
    # dispatch, a dry run included.
    return f"{stamp}-{os.urandom(3).hex()}"


class Outcome(StrEnum):
    LAUNCHED = "launched"
    REFUSED = "refused"
    DRY_RUN = "dry-run"  # every check up to the claim passed; nothing was started


@dataclass(frozen=True)
class Refusal:
    """One check's no: seed 003's check number (None for a refusal no numbered check names), the
    exit code, the line that says why, and the worker it concerns when it concerns one."""

    check: int | None
    code: Exit
    detail: str
    worker: str | None = None


@dataclass(frozen=True)
class DispatchResult:
    issue: int
    outcome: Outcome
    check: int | None  # the pre-flight check that refused (None when launched / dry-run)
    code: Exit
    reason: str
    worker: str | None = None
    unit: str | None = None
    run_id: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # probe_to_live_s, lock_held_s, ...

    @classmethod
    def for_launch(
        cls, issue: int, worker: str, run_id: str, unit: Unit | None, timings: dict[str, float]
    ) -> DispatchResult:
        started = f"start {unit.start_us} µs monotonic" if unit is not None else "started"
        return cls(
            issue, Outcome.LAUNCHED, None, Exit.OK, started, worker, unit_name(issue), run_id,
            timings,
        )  # fmt: skip

    @classmethod
    def for_refusal(
        cls, issue: int, refusal: Refusal, run_id: str, worker: str | None = None
    ) -> DispatchResult:
        """``worker``: the one the request named or the path chose, when the check named none."""
        return cls(
            issue, Outcome.REFUSED, refusal.check, refusal.code, refusal.detail,
            refusal.worker or worker, unit_name(issue), run_id,
        )  # fmt: skip

    @classmethod
    def for_dry_run(cls, issue: int, worker: str, run_id: str) -> DispatchResult:
        return cls(
            issue, Outcome.DRY_RUN, None, Exit.OK,
            "every check up to the claim passed; nothing launched", worker, unit_name(issue),
            run_id,
        )  # fmt: skip

    @property
    def launched(self) -> bool:
        return self.outcome is Outcome.LAUNCHED

    def line(self) -> str:
        """The one-line reason for stderr, naming the check."""
        if self.outcome is Outcome.REFUSED:
            return f"fleet: #{self.issue} refused by check {self.check}: {self.reason}"
        return f"fleet: #{self.issue} {self.outcome} on {self.worker} as {self.unit}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {
            "issue": self.issue,
            "outcome": str(self.outcome),
            "check": self.check,
            "code": int(self.code),
            "reason": self.reason,
            "worker": self.worker,
            "unit": self.unit,
            "run_id": self.run_id,
        }
