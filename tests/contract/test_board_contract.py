"""The Board contract: what every backend must do, written against the Protocol only.

Backend-specific setup (pushing a branch, opening and merging a PR, setting CI) goes through the
``forge`` fixture; everything else is a Board method, so the same tests judge every backend.
"""

from __future__ import annotations

import itertools

import pytest

from fleet.board.base import Board, BoardPage, BoardWriteError
from fleet.core.model import CIState, EventKind, IssueState, PRState, StateReason
from tests.contract import Forge

FIXTURE = "fleet-fixture"  # fleet.core.model.Policy's default fixture label (predicate 9)


def test_backend_satisfies_the_protocol(board: Board) -> None:
    assert isinstance(board, Board)
    assert board.identity


def test_create_then_read_and_issue_round_trip(board: Board) -> None:
    n = board.create_issue(
        "make the thing", "the body\nover two lines", assignees=["alice"], lane="gpu"
    )
    page = board.read()
    assert isinstance(page, BoardPage)
    (seen,) = [i for i in page.issues if i.number == n]
    assert (seen.title, seen.body, seen.state) == (
        "make the thing",
        "the body\nover two lines",
        IssueState.OPEN,
    )
    assert seen.assignees == ("alice",)
    assert seen.lane == "gpu"
    assert seen.status == "Todo"
    assert seen.created_at is not None and seen.created_at.tzinfo is not None
    assert board.issue(n) == seen
    assert page.read_at >= seen.created_at


def test_missing_issue_is_none_and_writes_to_it_fail(board: Board) -> None:
    board.create_issue("exists")
    assert board.issue(987_654) is None
    with pytest.raises(BoardWriteError, match="987654"):
        board.comment(987_654, "hello")
    with pytest.raises(BoardWriteError):
        board.close(987_654)


def test_read_returns_open_issues_in_number_order(board: Board) -> None:
    numbers = [board.create_issue(f"issue {k}") for k in range(4)]
    board.close(numbers[1])
    got = [i.number for i in board.read().issues if i.number in numbers]
    assert got == [numbers[0], numbers[2], numbers[3]]


def test_fixture_label_is_present_in_the_very_first_read(board: Board) -> None:
    n = board.create_issue("probe: throwaway", labels=[FIXTURE])
    (first,) = [i for i in board.read().issues if i.number == n]
    assert FIXTURE in first.labels


def test_labels_add_remove_without_duplicates(board: Board) -> None:
    n = board.create_issue("labelled", labels=["a"])
    board.add_labels(n, ["a", "b"])
    board.remove_label(n, "a")
    issue = board.issue(n)
    assert issue is not None and issue.labels == ("b",)
    kinds = [(e.kind, e.detail) for e in issue.events if e.detail in {"a", "b"}]
    assert kinds[-2:] == [(EventKind.LABELED, "b"), (EventKind.UNLABELED, "a")]


def test_comments_keep_order_with_strictly_increasing_microsecond_times(
    board: Board, forge: Forge
) -> None:
    n = board.create_issue("chatty")
    posted = [forge.comment_as(n, f"comment {k}", "someone") for k in range(6)]
    issue = board.issue(n)
    assert issue is not None
    assert [c.body for c in issue.comments] == [f"comment {k}" for k in range(6)]
    assert list(issue.comments) == posted
    times = [c.created_at for c in issue.comments]
    assert all(a < b for a, b in itertools.pairwise(times))
    assert all(t.tzinfo is not None for t in times)


def test_comment_author_defaults_to_the_fleet_identity(board: Board, forge: Forge) -> None:
    n = board.create_issue("who speaks")
    assert board.comment(n, "from the fleet").author == board.identity
    assert forge.comment_as(n, "from a human", "human").author == "human"


def test_close_with_reason_then_reopen_records_events(board: Board) -> None:
    n = board.create_issue("will be dropped")
    board.close(n, StateReason.NOT_PLANNED)
    closed = board.issue(n)
    assert closed is not None
    assert (closed.state, closed.state_reason) == (IssueState.CLOSED, StateReason.NOT_PLANNED)
    assert closed.closed_at is not None
    assert n not in [i.number for i in board.read().issues]

    board.reopen(n)
    reopened = board.issue(n)
    assert reopened is not None and reopened.is_open and reopened.state_reason is None
    kinds = [e.kind for e in reopened.events if e.kind in {EventKind.CLOSED, EventKind.REOPENED}]
    assert kinds == [EventKind.CLOSED, EventKind.REOPENED]
    closing = next(e for e in reopened.events if e.kind is EventKind.CLOSED)
    assert closing.detail == StateReason.NOT_PLANNED.value
    times = [e.at for e in reopened.events]
    assert times == sorted(times)


def test_comment_on_a_closed_issue_is_stored_and_returned(board: Board) -> None:
    """D12: closing first and commenting after must never drop the comment."""
    n = board.create_issue("closed by a merge")
    board.close(n)
    stored = board.comment(n, "close-out after the close")
    issue = board.issue(n)
    assert issue is not None and not issue.is_open
    assert issue.comments[-1] == stored


def test_parent_sub_issue_and_blocker_refs_carry_the_other_state(board: Board) -> None:
    parent = board.create_issue("parent")
    child = board.create_issue("child")
    blocker = board.create_issue("blocker")
    board.set_parent(child, parent)
    board.add_blocker(parent, blocker)
    board.close(child)

    seen = {i.number: i for i in board.read().issues}
    assert seen[parent].sub_issues[0].number == child
    assert seen[parent].sub_issues[0].state is IssueState.CLOSED
    assert seen[parent].open_sub_issues == ()
    assert seen[parent].open_blockers == (blocker,)
    closed_child = board.issue(child)
    assert closed_child is not None and closed_child.parent is not None
    assert (closed_child.parent.number, closed_child.parent.state) == (parent, IssueState.OPEN)

    board.remove_blocker(parent, blocker)
    board.set_parent(child, None)
    after = board.issue(parent)
    assert after is not None and after.blocked_by == () and after.sub_issues == ()


def test_mentions_go_from_unread_to_read(board: Board, forge: Forge) -> None:
    n = board.create_issue("talk to the fleet")
    forge.comment_as(n, f"@{board.identity} please also update the docs", "human")
    forge.comment_as(n, f"mail {board.identity}@example.com, or ask @{board.identity}wood", "h")
    unread = board.unread_mentions(n)
    assert [m.body for m in unread] == [f"@{board.identity} please also update the docs"]
    assert unread[0].issue == n and unread[0].author == "human" and not unread[0].read
    board.mark_mentions_read([m.id for m in unread])
    assert board.unread_mentions(n) == ()


def test_each_mention_is_delivered_once_whatever_comes_after_it(board: Board, forge: Forge) -> None:
    """GitHub keeps ONE notification thread per issue whose latest comment may be the fleet's own
    marker: several mentions and a later non-mention comment must still read as each mention,
    with its own words and author; one posted after the injection comes with the next run (D19)."""
    n = board.create_issue("a busy thread")
    forge.comment_as(n, f"@{board.identity} first: also update the docs", "alice")
    forge.comment_as(n, f"and @{board.identity.upper()} second: keep the API", "bob")
    forge.comment_as(n, "unrelated chatter", "carol")
    board.comment(n, "▶ fleet:start run=r1")  # the fleet's own latest activity
    unread = board.unread_mentions(n)
    assert [(m.author, m.body) for m in unread] == [
        ("alice", f"@{board.identity} first: also update the docs"),
        ("bob", f"and @{board.identity.upper()} second: keep the API"),
    ]
    board.mark_mentions_read([m.id for m in unread])
    forge.comment_as(n, f"@{board.identity} third, after the brief was written", "alice")
    board.comment(n, "✔ fleet:success run=r1")
    (later,) = board.unread_mentions(n)
    assert later.body.endswith("third, after the brief was written")
    board.mark_mentions_read([later.id])
    board.mark_mentions_read([later.id])  # twice changes nothing
    assert board.unread_mentions(n) == ()


def test_ci_status_reads_what_was_set(board: Board, forge: Forge) -> None:
    forge.set_ci(CIState.RED)
    assert board.ci_status() is CIState.RED
    forge.set_ci(CIState.GREEN)
    assert board.ci_status() is CIState.GREEN


def test_pull_requests_closing_follows_the_adjacency_rule(board: Board, forge: Forge) -> None:
    """D16: 'fixes #1 and #2' closes #1 only; a keyword must sit right before the reference."""
    first = board.create_issue("first")
    second = board.create_issue("second")
    both = forge.open_pr(f"fixes #{first} and #{second}")
    forge.open_pr(f"This fixes the failing criterion from VERIFY #{second}")

    assert [p.number for p in board.pull_requests_closing(first)] == [both.number]
    assert board.pull_requests_closing(second) == ()


def test_merging_a_pr_closes_what_it_references(board: Board, forge: Forge) -> None:
    """D2: completion is a merged PR whose body says Closes #N."""
    target = board.create_issue("to be completed")
    mentioned = board.create_issue("only mentioned")
    pr = forge.open_pr(f"Closes #{target}; related to #{mentioned}")
    merged = forge.merge(pr)
    assert merged.merged and merged.state is PRState.MERGED
    assert merged.merged_at is not None and merged.created_at < merged.merged_at

    done = board.issue(target)
    assert done is not None
    assert (done.state, done.state_reason) == (IssueState.CLOSED, StateReason.COMPLETED)
    still = board.issue(mentioned)
    assert still is not None and still.is_open
    (closing,) = board.pull_requests_closing(target)
    assert closing.number == pr.number and closing.merged
