"""Derive a run's outcome from the forge, never from the exit code or the model's claim (step 8).

Completion is a merged PR whose body closes the issue (D2), attributed by time (D16): only a PR
created at or after ``RUN_STARTED_AT`` can be this run's. The rules, first match wins:

1. an external signal → ``STOPPED``: a deliberate stop claims nothing about the work (D12);
2. the run timed out → ``TIMED_OUT``;
3. zero turns (no envelope, or ``num_turns == 0``) → no artifact can be this run's, structurally
   (D16): ``CAPACITY`` on a limit, ``RETRY_PARKED`` when the gate retries, else ``FAILED``/``NO_OP``
   by exit code. A *garbled* capture proves nothing about turns, so it skips this rule and lets the
   forge speak: a merged PR after the start is evidence the model cannot forge;
4. an own-repository PR created at/after the start: merged → ``SUCCESS``; open → ``PR_OPEN`` (an open
   PR is not finished, D2); else the run met its turn bound (D13) → ``TURN_LIMIT``;
5. a merged PR of *another* repository created after the start: ``SUCCESS`` when the forge says it
   closed the issue (``closed_issue``: GitHub closes an issue by a cross-repository closing keyword
   of a user with access), else ``TOMBSTONE_RISK``: a success marker on an issue that stays open is
   a tombstone (D6);
6. a limit → ``CAPACITY``; a declared blocker → ``BLOCKED`` (D9); a garbled capture → ``GARBLED``;
   a non-zero exit or ``is_error`` → ``FAILED``; otherwise ``NO_OP`` — no PR is never a success.

Pure: the runner's shell gathers the values, this function only decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from fleet.core.model import PRState, PullRequest, utc
from fleet.runner.capacity import LimitSignal
from fleet.runner.envelope import CaptureKind, Reading
from fleet.runner.retry import RetryDecision


class Outcome(StrEnum):
    SUCCESS = "success"
    PR_OPEN = "pr-open"
    NO_OP = "no-op"
    FAILED = "failed"
    BLOCKED = "blocked"
    CAPACITY = "capacity"
    RETRY_PARKED = "retry-parked"
    STOPPED = "stopped"
    TIMED_OUT = "timed-out"
    TURN_LIMIT = "turn-limit"  # policy.max_turns reached: by the CLI's own flag or the runner's
    GARBLED = "garbled"
    TOMBSTONE_RISK = "tombstone-risk"


@dataclass(frozen=True)
class OutcomeDecision:
    outcome: Outcome
    pr: PullRequest | None  # the PR the outcome rests on, if any
    detail: str


def _this_runs(prs: Sequence[PullRequest], started: datetime) -> list[PullRequest]:
    """PRs created at or after the run's start, oldest first (D16: created-before is not ours)."""
    return sorted((p for p in prs if utc(p.created_at) >= started), key=lambda p: p.created_at)


def _limit_detail(limit: LimitSignal) -> str:
    reset = "unknown" if limit.reset_at is None else utc(limit.reset_at).isoformat()
    return f"{limit.source.value} (reset {reset}): {limit.evidence}"


def _zero_turns(
    capture: Reading, exit_code: int | None, limit: LimitSignal | None, retry: RetryDecision | None
) -> OutcomeDecision:
    why = f"zero turns ({capture.detail}), so no artifact can be this run's"
    if limit is not None:
        return OutcomeDecision(Outcome.CAPACITY, None, f"{why}; {_limit_detail(limit)}")
    if retry is not None and retry.retry:
        return OutcomeDecision(Outcome.RETRY_PARKED, None, f"{why}; {retry.reason}")
    if exit_code != 0:
        return OutcomeDecision(Outcome.FAILED, None, f"{why}; exit {exit_code}")
    return OutcomeDecision(Outcome.NO_OP, None, f"{why}; exit 0")


def derive_outcome(
    *,
    prs: Sequence[PullRequest],
    run_started_at: datetime,
    capture: Reading,
    exit_code: int | None,
    signal: str | None,
    timed_out: bool,
    limit: LimitSignal | None,
    retry: RetryDecision | None,
    declared_blocker: dict[str, Any] | None,
    turn_limited: str | None = None,
) -> OutcomeDecision:
    """The terminal outcome of one run; ``prs`` are the PRs whose bodies close the issue.
    ``turn_limited`` says how the runner stopped the agent at policy.max_turns (D13), if it did."""
    if signal is not None:
        return OutcomeDecision(
            Outcome.STOPPED, None, f"stopped by {signal}; no claim about the work"
        )
    if timed_out:
        return OutcomeDecision(Outcome.TIMED_OUT, None, "the run hit its time limit")
    if capture.zero_turns is True:
        return _zero_turns(capture, exit_code, limit, retry)

    ours = _this_runs(prs, utc(run_started_at))
    forge = _by_the_forge(ours, turn_limited)
    if forge is not None:
        return forge
    return _no_pr(capture, exit_code, limit, declared_blocker)


def _by_the_forge(ours: list[PullRequest], turn_limited: str | None) -> OutcomeDecision | None:
    """Rules 4 and 5, what this run's PRs say; the turn bound (D13) ranks below a success and
    above a tombstone risk. None when no PR of this run decides it."""
    own = [p for p in ours if p.repository == ""]
    merged = [p for p in own if p.merged]
    if merged:
        pr = merged[-1]
        return OutcomeDecision(Outcome.SUCCESS, pr, f"PR #{pr.number} merged, created after start")
    still_open = [p for p in own if p.state is PRState.OPEN and not p.merged]
    if still_open:
        pr = still_open[-1]
        return OutcomeDecision(Outcome.PR_OPEN, pr, f"PR #{pr.number} is open: not finished (D2)")
    foreign = [p for p in ours if p.repository != "" and p.merged]
    closers = [p for p in foreign if p.closed_issue]
    if closers:  # GitHub closed the issue by it: a success by GitHub's rules, no tombstone (D6)
        pr = closers[-1]
        return OutcomeDecision(
            Outcome.SUCCESS,
            pr,
            f"PR {pr.repository}#{pr.number} merged in another repository and GitHub closed this "
            "issue by it",
        )
    if turn_limited is not None:  # after the successes: the forge's answer outranks the bound (D2)
        return OutcomeDecision(Outcome.TURN_LIMIT, None, turn_limited)
    if foreign:
        pr = foreign[-1]
        return OutcomeDecision(
            Outcome.TOMBSTONE_RISK,
            pr,
            f"PR {pr.repository}#{pr.number} merged in another repository: "
            "the issue was not closed by it",
        )
    return None


def _no_pr(
    capture: Reading,
    exit_code: int | None,
    limit: LimitSignal | None,
    declared_blocker: dict[str, Any] | None,
) -> OutcomeDecision:
    """Rule 6: no PR of this run decides it, so the run's own signs do."""
    if limit is not None:
        return OutcomeDecision(Outcome.CAPACITY, None, _limit_detail(limit))
    if declared_blocker is not None:
        return OutcomeDecision(Outcome.BLOCKED, None, f"declared blocker: {declared_blocker}")
    if capture.kind is CaptureKind.GARBLED:
        return OutcomeDecision(Outcome.GARBLED, None, capture.detail)
    if exit_code != 0 or capture.is_error:
        return OutcomeDecision(Outcome.FAILED, None, f"no PR; exit {exit_code}; {capture.detail}")
    return OutcomeDecision(Outcome.NO_OP, None, "no PR created after the start: a no-op")
