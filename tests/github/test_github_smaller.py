"""#11 item 8, the smaller ones: the board's own reads are reads; a 422 keeps GitHub's detail; a
parent in another repository is detached where it lives."""

from __future__ import annotations

from tests.github.backend import commands_on, github_board
from tests.github.replay import Replayer


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_the_project_and_item_reads_are_retried_on_a_5xx_like_every_read() -> None:
    state, sleeps = Replayer(), Sleeps()
    board = github_board(state, sleep=sleeps)
    n = board.create_issue("placed", status=None)
    fresh = github_board(state, sleep=sleeps)  # its field ids not read yet
    fresh.whoami()  # the identity check is its own read; take it out of the way
    state.enqueue("POST", "/graphql", "rest_server_error")  # the PROJECT read meets a 502
    fresh.set_status(n, "Todo")
    assert sleeps == [2.0] and state.issues[n].fields["Status"] == "Todo"


def test_a_422_keeps_githubs_detail_in_the_message() -> None:
    import pytest

    from fleet.board.base import BoardWriteError

    state = Replayer()
    board = github_board(state)
    n = board.create_issue("child")
    state.enqueue("POST", r".*/sub_issues", "rest_validation_failed")
    with pytest.raises(BoardWriteError, match=r"Validation Failed \(Issue.sub_issue_id invalid\)"):
        board.set_parent(n, n)


def test_a_parent_in_another_repository_is_detached_where_it_lives() -> None:
    state = Replayer()
    board = github_board(state)
    child = board.create_issue("child")
    other = "/repos/octo-org/other/issues/5"
    state.enqueue("GET", rf".*/issues/{child}/parent", "rest_issue_other_repo")
    state.enqueue("DELETE", rf"{other}/sub_issue", "rest_issue_other_repo")
    board.set_parent(child, None)
    deletes = [p for m, p, _ in state.requests if m == "DELETE"]
    assert deletes == [f"{other}/sub_issue"]  # never our own #5


def test_board_list_and_comment_work_on_a_github_board(tmp_path, monkeypatch, capsys) -> None:
    from fleet.cmd import board as board_cmd

    state = Replayer(login="fleet")
    n = state.add_issue("work").number
    state.issues[n].item_id = "PVTI_REPLAY00001"
    inventory = str(commands_on(state, tmp_path, monkeypatch))
    board_cmd.list_(inventory, None, False)
    assert "work" in capsys.readouterr().out
    board_cmd.comment(inventory, n, "a note", None)
    assert state.issues[n].comments[-1]["author"] == "fleet"


def test_a_merged_pr_of_another_repository_that_closed_the_issue_is_a_success() -> None:
    """GitHub's rule: `Fixes octo-org/widgets#N` in a PR of octo-org/other closes #N when merged
    (its author has access). GitHub records the PR as the closer; that is this run's success, not a
    latch. A cross-repo merge GitHub did not close the issue by stays a tombstone risk (D6)."""
    from datetime import timedelta

    from fleet.core.markers import Kind
    from tests.github.test_github_board import _close_out

    state = Replayer()
    board = github_board(state)
    n, m = board.create_issue("fixed elsewhere"), board.create_issue("mentioned elsewhere")
    start = state.tick()
    closer = state.open_pr(f"Fixes {state.full_name}#{n}", repository="octo-org/other")
    state.merge(closer)
    (pr,) = board.pull_requests_closing(n)
    assert (pr.repository, pr.merged, pr.closed_issue) == ("octo-org/other", True, True)
    assert board.issue(n).state.value == "closed"  # type: ignore[union-attr]
    assert _close_out(pr, started=start - timedelta(seconds=1)) is Kind.SUCCESS
    linked = state.open_pr("a change", repository="octo-org/other", closes=[m])
    linked.state, linked.merged_at = "MERGED", state.tick()  # merged, but the issue stays open
    (other,) = board.pull_requests_closing(m)
    assert other.merged and not other.closed_issue
    assert _close_out(other, started=start - timedelta(seconds=1)) is Kind.CROSS_REPO
