"""CI on main as GitHub reports it (#11 item 4): every page of check runs, combined with the commit
statuses; neutral and skipped pass as GitHub's branch protection counts them, stale does not."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.board.github.forge import ci_state
from fleet.core.model import CIState
from tests.github.backend import github_board
from tests.github.replay import Replayer


def test_a_failing_31st_check_run_makes_main_red() -> None:
    """Recorded: GitHub's default page holds 30 runs; the 31st, on page 2, failed."""
    state = Replayer(owner="octocat", repo="Hello-World")
    check_runs = r"/repos/octocat/Hello-World/commits/main/check-runs"
    state.enqueue("GET", check_runs, "rest_check_runs_page1")
    state.enqueue("GET", check_runs, "rest_check_runs_page2")
    assert github_board(state).ci_status() is CIState.RED
    pages = [p for m, p, _ in state.requests if m == "GET" and p.endswith("/check-runs")]
    assert len(pages) == 2


def test_the_replayer_pages_as_github_does_and_the_board_reads_every_page() -> None:
    state = Replayer()
    state.ci = ("success", ["success"] * 130 + ["failure"])
    assert github_board(state).ci_status() is CIState.RED  # run 131: page 2 at 100 a page
    state.ci = ("success", ["success"] * 131)
    assert github_board(state).ci_status() is CIState.GREEN


def test_a_failing_commit_status_beside_green_check_runs_is_red() -> None:
    state = Replayer()
    state.ci = ("failure", ["success"] * 40)
    assert github_board(state).ci_status() is CIState.RED


@pytest.mark.parametrize(
    ("conclusions", "expected"),
    [
        (["success", "neutral", "skipped"], CIState.GREEN),  # branch protection passes these
        (["success", "stale"], CIState.UNKNOWN),  # GitHub gave up on it: no signal either way
        (["success", "cancelled"], CIState.UNKNOWN),
        (["success", "action_required"], CIState.UNKNOWN),
        (["success", "timed_out"], CIState.RED),
        (["success", "startup_failure"], CIState.RED),
    ],
)
def test_conclusions_as_github_treats_them(conclusions: list[str], expected: CIState) -> None:
    runs = [{"status": "completed", "conclusion": c} for c in conclusions]
    assert ci_state({"state": "pending", "total_count": 0}, runs) is expected


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 250), st.integers(0, 250))
def test_ci_is_red_wherever_the_failing_run_sits(before: int, after: int) -> None:
    state = Replayer()
    state.ci = ("none", ["success"] * before + ["failure"] + ["success"] * after)
    assert github_board(state).ci_status() is CIState.RED
