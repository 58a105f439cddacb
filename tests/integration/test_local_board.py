"""The embedded board beyond the contract: real git merges, the board clock, the cost of a read."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import git
import pytest

from fleet.board.base import BoardUnreadable, BoardWriteError
from fleet.board.local import LocalBoard
from fleet.board.local.forge import FORGE_NAME, MergeConflict
from fleet.core.model import CIState, EventKind, IssueState, PRState, StateReason, Status
from tests.contract import push_branch


@pytest.fixture
def board(tmp_path: Path) -> LocalBoard:
    return LocalBoard.create(tmp_path / "board.db", tmp_path / "origin.git")


def _main(board: LocalBoard) -> str:
    assert board.origin is not None
    return git.Repo(board.origin).commit("main").hexsha


def _push(board: LocalBoard, tmp: Path, branch: str, files: dict[str, str]) -> str:
    assert board.origin is not None
    return push_branch(board.origin, branch, files, tmp)


# -- the forge -------------------------------------------------------------------------------------
def test_merge_is_a_real_merge_into_main_that_closes_referenced_issues(
    board: LocalBoard, tmp_path: Path
) -> None:
    a, b, c = (board.create_issue(t) for t in ("a", "b", "c"))
    head = _push(board, tmp_path, "feature", {"feature.txt": "new\n"})
    before = _main(board)
    body = f"Fixes #{a} and #{b}.\nResolves local/origin#{c}\nCloses #4040 (no such issue)"
    pr = board.create_pr("feature", "add feature", body)

    merged = board.merge_pr(pr.number, merged_by="reviewer")

    commit = git.Repo(board.origin).commit("main")
    assert [p.hexsha for p in commit.parents] == [before, head]
    assert commit.committer.name == FORGE_NAME and commit.author.name == "reviewer"
    assert (commit.tree / "feature.txt").data_stream.read() == b"new\n"
    assert merged.state is PRState.MERGED and merged.merged
    assert merged.merged_at is not None and merged.created_at < merged.merged_at
    states = {n: board.issue(n) for n in (a, b, c)}
    assert states[a] is not None and states[a].state is IssueState.CLOSED
    assert states[a].status == Status.DONE.value
    assert states[b] is not None and states[b].is_open  # "and #b" is not adjacent (D16)
    assert states[c] is not None and states[c].state_reason is StateReason.COMPLETED
    closed = [e for e in states[a].events if e.kind is EventKind.CLOSED]
    assert [(e.actor, e.detail) for e in closed] == [("reviewer", "completed")]
    assert closed[0].at > merged.merged_at


def test_conflict_raises_and_leaves_origin_and_board_untouched(
    board: LocalBoard, tmp_path: Path
) -> None:
    n = board.create_issue("contested")
    _push(board, tmp_path, "left", {"README.md": "left\n"})
    _push(board, tmp_path, "right", {"README.md": "right\n"})
    board.merge_pr(board.create_pr("left", "left", "no refs").number)
    after_left = _main(board)
    right = board.create_pr("right", "right", f"Closes #{n}")

    with pytest.raises(MergeConflict, match="merge conflict"):
        board.merge_pr(right.number)

    assert _main(board) == after_left
    assert board.pull_request(right.number) == right
    issue = board.issue(n)
    assert issue is not None and issue.is_open


def test_other_repository_pr_closes_nothing_but_is_listed(board: LocalBoard) -> None:
    """D6's tombstone: a cross-repo Closes cannot close our issue; attribution must still see it."""
    n = board.create_issue("fixed elsewhere")
    before = _main(board)
    pr = board.create_pr("fix", "elsewhere", f"Closes local/origin#{n}", repository="someone/else")
    merged = board.merge_pr(pr.number)

    assert merged.merged and merged.repository == "someone/else"
    issue = board.issue(n)
    assert issue is not None and issue.is_open
    assert _main(board) == before
    assert [p.number for p in board.pull_requests_closing(n)] == [pr.number]
    # Another repository's bare "#n" is its own issue, not ours.
    board.create_pr("fix2", "elsewhere", f"Closes #{n}", repository="someone/else")
    assert [p.number for p in board.pull_requests_closing(n)] == [pr.number]


def test_branch_already_in_main_takes_the_fast_path(board: LocalBoard, tmp_path: Path) -> None:
    n = board.create_issue("already landed")
    _push(board, tmp_path, "done", {"done.txt": "x\n"})
    first = board.merge_pr(board.create_pr("done", "one", "no refs").number)
    tip = _main(board)
    second = board.create_pr("done", "again", f"Fixes #{n}")
    assert board.merge_pr(second.number).merged and first.merged
    assert _main(board) == tip
    issue = board.issue(n)
    assert issue is not None and issue.state is IssueState.CLOSED


def test_merge_builds_on_a_main_that_moved_since_the_pr_opened(
    board: LocalBoard, tmp_path: Path
) -> None:
    _push(board, tmp_path, "topic", {"topic.txt": "t\n"})
    pr = board.create_pr("topic", "topic", "")
    _push(board, tmp_path, "main", {"hotfix.txt": "h\n"})  # a push straight to main
    board.merge_pr(pr.number)
    tree = git.Repo(board.origin).commit("main").tree
    assert {"topic.txt", "hotfix.txt", "README.md"} <= {b.name for b in tree.blobs}


def test_pr_misuse_is_refused(board: LocalBoard, tmp_path: Path) -> None:
    with pytest.raises(BoardWriteError, match="not in origin"):
        board.create_pr("never-pushed", "t", "")
    with pytest.raises(BoardWriteError, match="branch name"):
        board.create_pr("--force", "t", "")
    with pytest.raises(BoardWriteError, match="no pull request #77"):
        board.merge_pr(77)
    _push(board, tmp_path, "x", {"x.txt": "x\n"})
    pr = board.merge_pr(board.create_pr("x", "x", "").number)
    with pytest.raises(BoardWriteError, match="merged"):
        board.merge_pr(pr.number)
    with pytest.raises(BoardWriteError, match="merged"):
        board.close_pr(pr.number)
    _push(board, tmp_path, "y", {"y.txt": "y\n"})
    closed = board.close_pr(board.create_pr("y", "y", "").number)
    assert closed.state is PRState.CLOSED and not closed.merged
    with pytest.raises(BoardWriteError, match="closed"):
        board.merge_pr(closed.number)
    assert [p.number for p in board.pull_requests()] == [pr.number, closed.number]


# -- the queue -------------------------------------------------------------------------------------
def test_create_is_idempotent_and_open_requires_an_existing_board(
    board: LocalBoard, tmp_path: Path
) -> None:
    n = board.create_issue("survives")
    tip = _main(board)
    again = LocalBoard.create(tmp_path / "board.db", tmp_path / "origin.git")
    assert again.issue(n) is not None and _main(again) == tip
    with pytest.raises(BoardUnreadable, match="cannot open board"):
        LocalBoard(tmp_path / "typo.db", None)
    assert not (tmp_path / "typo.db").exists()


def test_board_clock_is_strictly_increasing_even_when_the_wall_clock_is_not(
    tmp_path: Path,
) -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    walls = iter([start, start, start - timedelta(hours=1)] + [start] * 20)
    LocalBoard.create(tmp_path / "b.db", None)
    board = LocalBoard(tmp_path / "b.db", None, clock=lambda: next(walls))
    n = board.create_issue("frozen clock")
    stamps = [board.comment(n, str(k)).created_at for k in range(4)]
    issue = board.issue(n)
    assert issue is not None
    everything = sorted([e.at for e in issue.events] + stamps)
    assert len(set(everything)) == len(everything)
    assert stamps == sorted(stamps) and stamps[0] > start


def test_close_is_idempotent_and_reopen_resets_status(board: LocalBoard) -> None:
    n = board.create_issue("twice closed")
    board.set_status(n, Status.IN_PROGRESS.value)
    board.close(n)
    board.close(n, StateReason.NOT_PLANNED)  # already closed: no-op, no event
    closed = board.issue(n)
    assert closed is not None and closed.state_reason is StateReason.COMPLETED
    assert [e.kind for e in closed.events].count(EventKind.CLOSED) == 1
    assert closed.status == Status.DONE.value
    board.reopen(n)
    board.reopen(n)
    reopened = board.issue(n)
    assert reopened is not None and reopened.status == Status.TODO.value
    assert [e.kind for e in reopened.events].count(EventKind.REOPENED) == 1
    assert reopened.closed_at is None


def test_edges_refuse_self_and_cycles(board: LocalBoard) -> None:
    a, b, c = (board.create_issue(t) for t in "abc")
    board.set_parent(b, a)
    board.set_parent(c, b)
    with pytest.raises(BoardWriteError, match="cycle"):
        board.set_parent(a, c)
    with pytest.raises(BoardWriteError, match="cycle"):
        board.set_parent(a, a)
    with pytest.raises(BoardWriteError, match="itself"):
        board.add_blocker(a, a)
    with pytest.raises(BoardWriteError, match="#999"):
        board.add_blocker(a, 999)


def test_mentions_need_a_word_boundary(board: LocalBoard) -> None:
    n = board.create_issue("mentions")
    for body in ("@fleet go", "(@Fleet) go", "cc @fleet."):
        board.comment(n, body, author="h")
    for body in ("@fleetwood", "a@fleet", "@fleet/ops", "@fleet-bot", "fleet"):
        board.comment(n, body, author="h")
    assert [m.body for m in board.unread_mentions(n)] == ["@fleet go", "(@Fleet) go", "cc @fleet."]


def test_ci_status_fails_open_when_unreadable(
    board: LocalBoard, capsys: pytest.CaptureFixture[str]
) -> None:
    """Check 7: unreadable CI is UNKNOWN, never red (D5), and says so on stderr."""
    board.set_ci(CIState.RED)
    with sqlite3.connect(board.path) as raw:
        raw.execute("DROP TABLE ci")
    assert board.ci_status() is CIState.UNKNOWN
    assert "CI status unreadable" in capsys.readouterr().err


def test_read_cost_does_not_grow_with_the_number_of_issues(tmp_path: Path) -> None:
    """D1: one paginated read per cycle; its cost is constant in N, not per issue."""
    costs = []
    for size in (10, 200):
        board = LocalBoard.create(tmp_path / f"{size}.db", None)
        for k in range(size):
            n = board.create_issue(f"issue {k}", labels=["x"])
            board.comment(n, "a comment")
            board.comment(n, "another")
            if k:
                board.add_blocker(n, n - 1)
        before = board.statements()
        page = board.read()
        assert board.statements() - before == page.cost
        assert len(page.issues) == size
        assert all(len(i.comments) == 2 for i in page.issues)
        costs.append(page.cost)
    assert costs[0] == costs[1] and page.cost_unit == "statements"
    assert costs[0] <= 10
