"""Outcome derivation (step 8, D2, D12, D16): every branch, by a named table row."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.model import CapacitySource, PRState, PullRequest
from fleet.runner.capacity import LimitSignal
from fleet.runner.envelope import Capture, parse_capture
from fleet.runner.outcome import Outcome, derive_outcome
from fleet.runner.retry import RetryDecision

START = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
BEFORE, AFTER = START - timedelta(hours=2), START + timedelta(minutes=20)


def pr(
    number: int,
    *,
    created: datetime = AFTER,
    state: PRState = PRState.MERGED,
    repository: str = "",
) -> PullRequest:
    merged = state is PRState.MERGED
    return PullRequest(
        number=number,
        title="t",
        body="Closes #7",
        branch=f"fleet/issue-7-{number}",
        state=state,
        merged=merged,
        created_at=created,
        merged_at=created + timedelta(minutes=1) if merged else None,
        repository=repository,
    )


def envelope(turns: int = 5, *, is_error: bool = False) -> Capture:
    obj = {"type": "result", "subtype": "success", "num_turns": turns, "is_error": is_error}
    return parse_capture("noise\n" + json.dumps(obj))


WORKED = envelope(5)
ZERO_TURN_ENVELOPE = envelope(0, is_error=True)
NO_ENVELOPE = parse_capture("API Error: 529 Overloaded\n")
GARBLED = parse_capture('{"type":"result","num_turns":5,"res')
LIMIT = LimitSignal(CapacitySource.RATE_LIMIT, None, "You've hit your limit")
RETRY = RetryDecision(True, 30, "retry 1 of 3", ())
NO_RETRY = RetryDecision(False, None, "no retry", ())
BLOCKER = {"reason": "needs #9", "needs": [9]}

MERGED_NEW, OPEN_NEW = pr(11), pr(12, state=PRState.OPEN)
MERGED_OLD = pr(3, created=BEFORE)
CLOSED_NEW = pr(13, state=PRState.CLOSED)
FOREIGN_NEW = pr(21, repository="other/repo")
FOREIGN_OLD = pr(22, repository="other/repo", created=BEFORE)
MERGED_AT_START = pr(14, created=START)

CASES = [
    # id, overrides, expected outcome, expected PR number
    ("stopped-by-signal", {"signal": "SIGTERM"}, Outcome.STOPPED, None),
    (
        "stopped-claims-nothing-even-with-a-merged-pr",
        {"signal": "SIGTERM", "prs": [MERGED_NEW]},
        Outcome.STOPPED,
        None,
    ),
    ("timed-out", {"timed_out": True, "prs": [MERGED_NEW]}, Outcome.TIMED_OUT, None),
    (
        "zero-turns-limit-is-capacity",
        {"capture": NO_ENVELOPE, "limit": LIMIT, "exit_code": 1},
        Outcome.CAPACITY,
        None,
    ),
    (
        "zero-turns-retry-parks",
        {"capture": NO_ENVELOPE, "retry": RETRY, "exit_code": 1},
        Outcome.RETRY_PARKED,
        None,
    ),
    (
        "zero-turns-merged-pr-is-someone-elses",
        {"capture": NO_ENVELOPE, "prs": [MERGED_NEW], "exit_code": 1, "retry": NO_RETRY},
        Outcome.FAILED,
        None,
    ),
    (
        "zero-turn-envelope-credits-nothing",
        {"capture": ZERO_TURN_ENVELOPE, "prs": [MERGED_NEW, FOREIGN_NEW], "exit_code": 0},
        Outcome.NO_OP,
        None,
    ),
    ("zero-turns-exit-zero-is-no-op", {"capture": NO_ENVELOPE}, Outcome.NO_OP, None),
    ("merged-after-start-is-success", {"prs": [MERGED_NEW]}, Outcome.SUCCESS, 11),
    ("merged-at-the-start-instant-is-success", {"prs": [MERGED_AT_START]}, Outcome.SUCCESS, 14),
    (
        "success-even-though-a-limit-notice-trails-it",
        {"prs": [MERGED_NEW], "limit": LIMIT, "exit_code": 1},
        Outcome.SUCCESS,
        11,
    ),
    ("success-beats-an-open-pr", {"prs": [OPEN_NEW, MERGED_NEW]}, Outcome.SUCCESS, 11),
    ("open-pr-is-not-finished", {"prs": [OPEN_NEW]}, Outcome.PR_OPEN, 12),
    ("old-merged-pr-is-not-this-runs", {"prs": [MERGED_OLD]}, Outcome.NO_OP, None),
    (
        "old-merged-pr-and-a-limit-is-capacity",
        {"prs": [MERGED_OLD], "limit": LIMIT, "exit_code": 1},
        Outcome.CAPACITY,
        None,
    ),
    ("closed-unmerged-pr-is-nothing", {"prs": [CLOSED_NEW]}, Outcome.NO_OP, None),
    (
        "other-repo-merged-after-start-is-tombstone-risk",
        {"prs": [FOREIGN_NEW]},
        Outcome.TOMBSTONE_RISK,
        21,
    ),
    ("other-repo-merged-before-start-is-nothing", {"prs": [FOREIGN_OLD]}, Outcome.NO_OP, None),
    ("own-open-pr-outranks-tombstone-risk", {"prs": [FOREIGN_NEW, OPEN_NEW]}, Outcome.PR_OPEN, 12),
    ("limit-without-pr-is-capacity", {"limit": LIMIT, "exit_code": 1}, Outcome.CAPACITY, None),
    ("declared-blocker", {"declared_blocker": BLOCKER}, Outcome.BLOCKED, None),
    ("garbled-capture", {"capture": GARBLED}, Outcome.GARBLED, None),
    (
        "garbled-capture-with-a-merged-pr-lets-the-forge-speak",
        {"capture": GARBLED, "prs": [MERGED_NEW]},
        Outcome.SUCCESS,
        11,
    ),
    ("non-zero-exit-is-failed", {"exit_code": 2}, Outcome.FAILED, None),
    (
        "is-error-with-exit-zero-is-failed",
        {"capture": envelope(5, is_error=True)},
        Outcome.FAILED,
        None,
    ),
    ("no-pr-is-a-no-op-never-a-success", {}, Outcome.NO_OP, None),
    (
        "the-turn-bound-met-is-turn-limit",
        {"turn_limited": "stopped after 9 turns", "exit_code": None},
        Outcome.TURN_LIMIT,
        None,
    ),
    (
        "a-merged-pr-outranks-the-turn-bound",
        {"turn_limited": "stopped after 9 turns", "prs": [MERGED_NEW]},
        Outcome.SUCCESS,
        11,
    ),
]


def derive(**overrides: object):
    args: dict[str, object] = {
        "prs": [],
        "run_started_at": START,
        "capture": WORKED,
        "exit_code": 0,
        "signal": None,
        "timed_out": False,
        "limit": None,
        "retry": None,
        "declared_blocker": None,
    }
    args.update(overrides)
    return derive_outcome(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "expected", "pr_number"),
    [pytest.param(o, e, n, id=i) for i, o, e, n in CASES],
)
def test_outcome_table(overrides: dict, expected: Outcome, pr_number: int | None) -> None:
    decision = derive(**overrides)
    assert decision.outcome is expected, decision.detail
    assert (decision.pr.number if decision.pr else None) == pr_number
    assert decision.detail


def test_every_outcome_is_reached_by_the_table() -> None:
    assert {expected for _, _, expected, _ in CASES} == set(Outcome)


ALL_PRS = [MERGED_NEW, OPEN_NEW, MERGED_OLD, CLOSED_NEW, FOREIGN_NEW, FOREIGN_OLD]


@settings(max_examples=150, deadline=None)
@given(
    prs=st.lists(st.sampled_from(ALL_PRS), max_size=4),
    capture=st.sampled_from([WORKED, ZERO_TURN_ENVELOPE, NO_ENVELOPE, GARBLED]),
    exit_code=st.sampled_from([0, 1, None]),
    limit=st.sampled_from([None, LIMIT]),
    retry=st.sampled_from([None, RETRY, NO_RETRY]),
    blocker=st.sampled_from([None, BLOCKER]),
)
def test_success_needs_a_merged_own_pr_created_after_start_by_a_run_with_turns(
    prs: list[PullRequest],
    capture: Capture,
    exit_code: int | None,
    limit: LimitSignal | None,
    retry: RetryDecision | None,
    blocker: dict | None,
) -> None:
    d = derive(
        prs=prs,
        capture=capture,
        exit_code=exit_code,
        limit=limit,
        retry=retry,
        declared_blocker=blocker,
    )
    if d.outcome is Outcome.SUCCESS:
        assert d.pr is not None and d.pr.merged and d.pr.repository == ""
        assert d.pr.created_at >= START
        assert capture.zero_turns is not True
    if capture.zero_turns is True:
        assert d.pr is None  # structurally: no artifact can be a zero-turn run's (D16)
    if d.pr is None:
        assert d.outcome not in {Outcome.SUCCESS, Outcome.PR_OPEN, Outcome.TOMBSTONE_RISK}
