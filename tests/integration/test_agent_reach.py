"""The agent's reach (issue 16): what an agent, or a prompt injected into one, can do to the fleet
through the text it writes and the files it can touch, each attack run through the production path
(a real runner process, the real SQLite board, a real bare origin)."""

from __future__ import annotations

import git
import pytest

from fleet.exits import RunExit
from fleet.markers import Kind
from fleet.model import IssueState
from tests.contract import push_branch
from tests.integration.test_runner_steps import fleet_at, markers, run_runner

pytestmark = pytest.mark.timeout(120)

HUGE = "9" * 5000  # past Python's int-from-string limit (4,300 digits): int() raises ValueError
WIDE = "99999999999999999999"  # past SQLite's 64-bit integer: binding it raises OverflowError


# -- crafted closing references ------------------------------------------------------------------


def test_a_pr_body_with_a_5000_digit_reference_does_not_break_later_close_outs(tmp_path) -> None:
    """Before the bound, every later close-out raised ValueError while scanning PR bodies: exit 74,
    no terminal marker, the worktree never released."""
    with fleet_at(tmp_path) as f:
        victim = f.board.create_issue("Add a greeting", "body")
        origin = f.inventory.board.origin
        push_branch(origin, "evil", {"evil.txt": "x\n"}, tmp_path / "push")
        f.board.create_pr("evil", "evil", f"fixes #{HUGE}")  # type: ignore[attr-defined]

        res = run_runner(f, victim, "r1")

        assert res.returncode == RunExit.OK, res.stderr
        assert markers(f, victim) == [Kind.START, Kind.SUCCESS]
        assert list((f.root / "workers" / "w1" / "worktrees").iterdir()) == []


def test_a_reference_past_sqlite_integers_does_not_crash_the_merge_after_main_moved(
    tmp_path,
) -> None:
    """Before the bound, merge_pr moved main and then raised OverflowError closing '#<20 digits>'."""
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("real", "body")
        origin = f.inventory.board.origin
        push_branch(origin, "feature", {"f.txt": "x\n"}, tmp_path / "push")
        pr = f.board.create_pr(  # type: ignore[attr-defined]
            "feature", "feature", f"fixes #{WIDE}\nfixes #{n}"
        )
        before = git.Repo(origin).commit("main").hexsha

        merged = f.board.merge_pr(pr.number)  # type: ignore[attr-defined]

        assert merged.merged
        assert git.Repo(origin).commit("main").parents[0].hexsha == before
        issue = f.board.issue(n)
        assert issue is not None and issue.state is IssueState.CLOSED
