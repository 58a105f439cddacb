"""The per-issue memo: a hit only for an issue equal in everything a reading of it may depend on."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.issue_memo import BLOCK, IssueMemo, _check, _split
from fleet.core.model import Comment, Event, EventKind, Issue
from tests.builders import NOW, comment, issue, reopen

# Built once: the builders' clock gives every new comment a later time, so a second build differs.
BASE = replace(
    issue(7, timeline=[replace(comment("hello"), association="MEMBER"), comment("x"), reopen()]),
    author="alice",
    author_association="OWNER",
)


class Counting:
    """A reading that counts its calls, so a test sees whether the memo computed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, i: Issue) -> tuple[int, int]:
        self.calls += 1
        return (i.number, len(i.comments))


def test_an_equal_issue_read_again_into_new_objects_is_a_hit() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    first = BASE
    again = copy.deepcopy(first)  # a board read again: new objects, equal values
    assert again == first and again.comments[0] is not first.comments[0]
    assert memo.recall(first, count) == memo.recall(again, count)
    assert count.calls == 1


def _comment(i: Issue, **change: object) -> Issue:
    return replace(i, comments=(replace(i.comments[0], **change), *i.comments[1:]))


def _event(i: Issue, **change: object) -> Issue:
    return replace(i, events=(replace(i.events[0], **change),))


CHANGES: dict[str, Callable[[Issue], Issue]] = {
    "comment-id": lambda i: _comment(i, id=i.comments[0].id + 1000),
    "comment-body": lambda i: _comment(i, body="hello!"),
    "comment-author": lambda i: _comment(i, author="bob"),
    "comment-time": lambda i: _comment(i, created_at=i.comments[0].created_at + timedelta(1)),
    "comment-association": lambda i: _comment(i, association="NONE"),
    "a-comment-more": lambda i: replace(i, comments=(*i.comments, comment("hi"))),
    "a-comment-less": lambda i: replace(i, comments=i.comments[1:]),
    "event-kind": lambda i: _event(i, kind=EventKind.CLOSED),
    "event-time": lambda i: _event(i, at=i.events[0].at + timedelta(1)),
    "event-actor": lambda i: _event(i, actor="mallory"),
    "no-event": lambda i: replace(i, events=()),
    "issue-author": lambda i: replace(i, author="bob"),
    "issue-association": lambda i: replace(i, author_association="NONE"),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_any_change_a_reading_may_depend_on_is_computed_again(
    change: Callable[[Issue], Issue],
) -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    first = BASE
    memo.recall(first, count)
    changed = change(first)
    assert changed != first
    assert memo.recall(changed, count) == count(changed)  # this change's own answer
    assert count.calls == 3
    memo.recall(first, count)  # the entry was replaced, never kept beside a stale one
    assert count.calls == 4


def test_a_change_it_cannot_depend_on_is_still_a_hit() -> None:
    """The title and labels are not part of a reading of comments and events."""
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    memo.recall(BASE, count)
    memo.recall(replace(BASE, title="renamed", labels=("bug",)), count)
    assert count.calls == 1


def test_a_mutable_value_is_never_remembered() -> None:
    """A test double with a list where a string belongs could change in place after it was
    stored, so that it still compares equal: such an issue is computed every time."""
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    body: list[str] = ["fleet:release"]
    shady = replace(BASE, comments=(Comment(1, "x", body, NOW),))  # type: ignore[arg-type]
    memo.recall(shady, count)
    memo.recall(shady, count)
    assert count.calls == 2 and len(memo) == 0


def test_an_unhashable_number_is_computed_every_time() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    odd = replace(BASE, number=[7])  # type: ignore[arg-type]
    memo.recall(odd, lambda i: (0, 0))
    memo.recall(odd, count)
    assert count.calls == 1 and len(memo) == 0


def test_the_memo_is_bounded() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(3)
    count = Counting()
    for n in range(1, 8):
        memo.recall(replace(BASE, number=n), count)
        assert len(memo) <= 3
    assert count.calls == 7


def test_events_other_than_reopens_and_their_detail() -> None:
    """An event's detail is no part of the key; its kind, time and actor are."""
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    count = Counting()
    labelled = replace(BASE, events=(Event(EventKind.LABELED, BASE.events[0].at, "a", "x"),))
    memo.recall(labelled, count)
    memo.recall(_event(labelled, detail="y"), count)
    assert count.calls == 1


# -- a whole board, a block at a time ---------------------------------------------------------------


def _board(n: int) -> tuple[Issue, ...]:
    """``n`` issues numbered 1..n, each a copy of BASE: a few blocks of BLOCK issues."""
    return tuple(replace(BASE, number=k) for k in range(1, n + 1))


def test_a_board_read_again_is_one_hit_per_block_and_the_same_answers() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(1000)
    count = Counting()
    board = _board(3 * BLOCK + 5)
    first = memo.recall_all(board, count)
    assert first == [count(i) for i in board]
    calls = count.calls
    assert memo.recall_all(copy.deepcopy(board), count) == first
    assert count.calls == calls  # nothing computed again


def test_a_changed_issue_is_computed_again_and_its_block_neighbours_are_not() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(1000)
    count = Counting()
    board = _board(3 * BLOCK)
    memo.recall_all(board, count)
    count.calls = 0
    k = BLOCK + 3
    changed = (*board[:k], CHANGES["a-comment-more"](board[k]), *board[k + 1 :])
    assert memo.recall_all(changed, count) == [(i.number, len(i.comments)) for i in changed]
    assert count.calls == 1


def test_a_board_out_of_number_order_or_with_closed_issues_gone_reads_the_same() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(1000)
    count = Counting()
    board = _board(2 * BLOCK)
    memo.recall_all(board, count)
    shuffled = board[::-1][::2]
    assert memo.recall_all(shuffled, count) == [(i.number, len(i.comments)) for i in shuffled]


def test_a_board_with_an_unhashable_number_is_read_issue_by_issue() -> None:
    memo: IssueMemo[tuple[int, int]] = IssueMemo(10)
    odd = (BASE, replace(BASE, number=[8]))  # type: ignore[arg-type]
    assert memo.recall_all(odd, lambda i: (0, len(i.comments))) == [(0, 2), (0, 2)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2)), max_size=8))
def test_a_block_splits_into_exactly_the_checks_of_its_issues(shape: list[tuple[int, int]]) -> None:
    """A changed block is looked up issue by issue against its slices: each slice must be the
    check that issue alone gives, or an unchanged neighbour would be computed again (or worse)."""
    run = tuple(
        replace(
            BASE,
            number=k + 1,
            comments=tuple(
                replace(comment(f"c{j}"), association=("MEMBER", None)[j % 2]) for j in range(nc)
            ),
            events=tuple(reopen() for _ in range(ne)),
        )
        for k, (nc, ne) in enumerate(shape)
    )
    values = tuple(range(len(run)))
    assert list(_split(_check(run), values)) == [
        (i.number, (_check((i,)), v)) for i, v in zip(run, values, strict=True)
    ]
