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
