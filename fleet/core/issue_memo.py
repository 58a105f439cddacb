"""A bounded memo of one value per issue, for a pure reading of its comments, events and author.

Select derives every open issue's history each cycle (D1: nothing is stored between cycles but what
the board says). A long-lived reader (``fleet-status --watch``, the demo's drain) reads the board
again each cycle into NEW objects whose values are EQUAL to the last cycle's, so a memo keyed by the
objects never hits, and one keyed by the :class:`~fleet.core.model.Issue` value hashes and compares
through the dataclasses' Python-level ``__hash__``/``__eq__`` (a fresh datetime's hash alone is
~0.7 us, twenty per issue) and costs about what it saves.

So the key is the issue's number (an int, hashed in C) and the entry holds everything the reading
may depend on as tuples of plain values, compared with ``==`` in C on each lookup: every comment's
id, body, author, time and association, every event's kind, time and actor, the issue's author and
association. A hit is therefore an issue equal in all of those to the one the value was computed
from, which is exactly what a fresh computation would read; anything else is computed again and
replaces the entry. A reading that depends on anything more must not use this memo.

A whole board (:meth:`IssueMemo.recall_all`) is compared the same way a block of issues at a time —
the issues whose numbers share ``number // BLOCK`` — so the per-issue cost of building the check in
Python is paid once per block; a block that differs anywhere is looked up issue by issue, and a
block never seen is computed outright (a cold sweep builds one check per block, not per issue).

The entry holds references, so a value that could change in place would make a later equal-looking
lookup stale: an entry is stored only when its plain values hash (the times excepted — a datetime
is immutable), so a test double with a list or dict where a string belongs is computed every time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, groupby
from operator import attrgetter
from typing import Generic, TypeVar, cast

from fleet.core.model import Issue

T = TypeVar("T")

# Issues per block of a board: 64 amortizes the Python work of a look-up over as many issues, and a
# changed block costs 64 single look-ups (~0.6 ms here) on top of its one recomputed issue.
BLOCK = 64

_NUMBER = attrgetter("number")
_COMMENTS = attrgetter("comments")
_EVENTS = attrgetter("events")
_AUTHOR = attrgetter("author")  # an issue's and a comment's alike
_AUTHOR_ASSOCIATION = attrgetter("author_association")
_ID = attrgetter("id")
_BODY = attrgetter("body")
_AT = attrgetter("created_at")
_ASSOCIATION = attrgetter("association")
_EVENT = attrgetter("kind", "actor")
_EVENT_AT = attrgetter("at")

# (plain values that must hash, the times) of a run of issues, as an entry stores them.
_Check = tuple[tuple[tuple[object, ...], ...], tuple[tuple[object, ...], ...]]


def _check(issues: Sequence[Issue]) -> _Check:
    """What a reading of ``issues`` may depend on, one flat tuple per field; the counts of comments
    and events per issue say which of them belong to which issue."""
    comments = tuple(map(_COMMENTS, issues))
    events = tuple(map(_EVENTS, issues))
    cs = tuple(chain.from_iterable(comments))
    es = tuple(chain.from_iterable(events))
    plain = (
        tuple(map(_NUMBER, issues)),
        tuple(map(len, comments)),
        tuple(map(len, events)),
        tuple(map(_AUTHOR, issues)),
        tuple(map(_AUTHOR_ASSOCIATION, issues)),
        tuple(map(_ID, cs)),
        tuple(map(_BODY, cs)),
        tuple(map(_AUTHOR, cs)),
        tuple(map(_ASSOCIATION, cs)),
        tuple(map(_EVENT, es)),
    )
    return plain, (tuple(map(_AT, cs)), tuple(map(_EVENT_AT, es)))


def _storable(check: _Check) -> bool:
    try:
        hash(check[0])
    except TypeError:  # a mutable value where a plain one belongs: never remembered
        return False
    return True


class IssueMemo(Generic[T]):
    """``recall(issue, compute)``: ``compute(issue)``, or the value it returned for an issue equal
    in its comments, events and author. At most ``size`` issues (and as many blocks) are held; when
    full it is cleared (the cheapest bound, and a sweep re-fills it in one cycle)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[int, tuple[_Check, T]] = {}
        self._blocks: dict[int, tuple[_Check, tuple[T, ...]]] = {}

    def recall(self, issue: Issue, compute: Callable[[Issue], T]) -> T:
        number = issue.number
        check = _check((issue,))
        try:
            entry = self._entries.get(number)
        except TypeError:  # an unhashable number (a test double): nothing to key it by
            return compute(issue)
        if entry is not None and entry[0] == check:
            return entry[1]
        value = compute(issue)
        if _storable(check):
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[number] = (check, value)
        return value

    def recall_all(self, issues: Iterable[Issue], compute: Callable[[Issue], T]) -> list[T]:
        """``[recall(i, compute) for i in issues]``, a block of issues at a time."""
        out: list[T] = []
        issues = tuple(issues)
        try:
            blocks = [(k, tuple(run)) for k, run in groupby(issues, key=_block)]
        except TypeError:  # a number that is no int (a test double): one issue at a time
            return [self.recall(i, compute) for i in issues]
        for key, run in blocks:
            check = _check(run)
            entry = self._blocks.get(key)
            if entry is not None and entry[0] == check:
                out.extend(entry[1])
                continue
            if entry is None:  # never read (a cold sweep): no per-issue checks to build
                values = tuple(map(compute, run))
            else:  # changed: issue by issue against the block as it was, computing what changed
                if len(self._entries) + len(run) > self.size:
                    self._entries.clear()
                self._entries.update(_split(*entry))
                values = tuple(self.recall(i, compute) for i in run)
            if _storable(check):
                if len(self._blocks) >= self.size:
                    self._blocks.clear()
                self._blocks[key] = (check, values)
            out.extend(values)
        return out

    def __len__(self) -> int:
        return len(self._entries)


def _split(check: _Check, values: tuple[T, ...]) -> Iterator[tuple[int, tuple[_Check, T]]]:
    """A block's entry as the entries of its issues: each issue's slice of every column is exactly
    the check :func:`_check` builds for that issue alone."""
    plain, (ats, event_ats) = check
    numbers, comment_counts, event_counts = plain[0], plain[1], plain[2]
    c = e = 0
    for k, value in enumerate(values):
        c1, e1 = c + cast(int, comment_counts[k]), e + cast(int, event_counts[k])
        one = (
            tuple((column[k],) for column in plain[:5])
            + tuple(column[c:c1] for column in plain[5:9])
            + (plain[9][e:e1],)
        )
        yield cast(int, numbers[k]), ((one, (ats[c:c1], event_ats[e:e1])), value)
        c, e = c1, e1


def _block(issue: Issue) -> int:
    return issue.number // BLOCK
