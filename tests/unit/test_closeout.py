"""Step 8's pure decision (fleet.runner.closeout) — the function the runner itself calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from fleet.core.exits import RunExit
from fleet.core.markers import Kind, parse
from fleet.core.model import Comment, PRState, PullRequest
from fleet.runner.closeout import KINDS, decide_close_out
from fleet.runner.outcome import Outcome

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ENVELOPE = json.dumps(
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 4, "result": "done"}
)


def _pr(minutes: int, *, merged: bool = True, repository: str = "") -> PullRequest:
    at = START + timedelta(minutes=minutes)
    return PullRequest(
        7,
        "t",
        "Closes #1",
        "b",
        PRState.MERGED if merged else PRState.OPEN,
        merged,
        at,
        at if merged else None,
        repository,
    )


def _decide(**over: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = dict(
        output=f"noise\n{ENVELOPE}\n",
        prs=(),
        forge_error=None,
        run_started_at=START,
        exit_code=0,
        signal_name=None,
        timed_out=False,
        workspace_failure=None,
        retries_so_far=0,
        backoffs_s=(30, 120),
        results=None,
        now=START + timedelta(minutes=9),
    )
    args.update(over)
    return decide_close_out(**args)  # type: ignore[arg-type]


def _kind(out) -> Kind:  # type: ignore[no-untyped-def]
    m = parse(Comment(1, "fleet", out.marker, START))
    assert m is not None, out.marker
    return m.kind


@pytest.mark.parametrize(
    ("over", "outcome"),
    [
        pytest.param({"prs": (_pr(3),)}, Outcome.SUCCESS, id="merged-after-start"),
        pytest.param({"prs": (_pr(-3),)}, Outcome.NO_OP, id="merged-before-start-is-not-ours"),
        pytest.param({"prs": (_pr(3, merged=False),)}, Outcome.PR_OPEN, id="open-pr"),
        pytest.param(
            {"forge_error": "forge unreadable: 502"},
            Outcome.FAILED,
            id="unreadable-forge-is-never-a-no-op",
        ),
        pytest.param({"workspace_failure": "worktree broken"}, Outcome.FAILED, id="workspace"),
        pytest.param(
            {"workspace_failure": "x", "signal_name": "SIGTERM"},
            Outcome.STOPPED,
            id="a-signal-outranks-a-workspace-failure",
        ),
        pytest.param(
            {"output": "API Error: 529 overloaded\n", "exit_code": 1},
            Outcome.RETRY_PARKED,
            id="transient-before-first-turn",
        ),
        pytest.param(
            {"results": {"blocker": {"reason": "needs #3", "needs": [3]}}},
            Outcome.BLOCKED,
            id="declared-blocker",
        ),
    ],
)
def test_outcome_and_its_marker(over: dict[str, object], outcome: Outcome) -> None:
    out = _decide(**over)
    assert out.decision.outcome is outcome, out.decision.detail
    assert _kind(out) is KINDS[outcome]


def test_a_retry_park_carries_its_due_time() -> None:
    out = _decide(output="API Error: 529 overloaded\n", exit_code=1)
    m = parse(Comment(1, "fleet", out.marker, START))
    assert m is not None and m.get("due") == (START + timedelta(minutes=9, seconds=30)).isoformat(
        timespec="microseconds"
    )
    assert out.exit is RunExit.OK


def test_a_failure_exits_non_zero_for_the_onfailure_alarm() -> None:
    assert _decide(workspace_failure="broken").exit is RunExit.FAILED
    assert _decide(prs=(_pr(3),)).exit is RunExit.OK


def test_a_garbled_blocker_is_a_warning_not_a_blocker() -> None:
    out = _decide(results={"blocker": "not an object"})
    assert out.decision.outcome is not Outcome.BLOCKED and out.warnings


LEFT = {"left_open": {"reason": "part two remains"}}


@pytest.mark.parametrize(
    ("over", "posted"),
    [
        ({"prs": (_pr(3),), "results": LEFT}, True),  # success + the agent's word
        ({"prs": (_pr(3),)}, False),  # success alone: never inferred from an open issue
        ({"prs": (_pr(3, merged=False),), "results": LEFT}, False),  # pr-open keeps its latch
        ({"results": LEFT}, False),  # no PR: a no-op is not "finished"
        ({"prs": (_pr(3),), "results": {"left_open": "because"}}, False),  # wrong shape
    ],
    ids=["success-declared", "success-undeclared", "pr-open", "no-op", "garbled"],
)
def test_left_open_follows_only_a_declared_success(over: dict[str, object], posted: bool) -> None:
    out = _decide(**over)
    assert (out.left_open is not None) is posted
    if posted:
        m = parse(Comment(2, "fleet", out.left_open, START))
        assert m is not None and m.kind is Kind.LEFT_OPEN and m.get("pr") == "#7"
        assert "part two remains" in m.note
    if over.get("results") == {"left_open": "because"}:
        assert any("left_open must be an object" in w for w in out.warnings)
