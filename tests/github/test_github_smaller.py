"""#11 item 8, the smaller ones: the board's own reads are reads; a 422 keeps GitHub's detail; a
parent in another repository is detached where it lives."""

from __future__ import annotations

from tests.github.backend import github_board
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
