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

The entry holds references, so a value that could change in place would make a later equal-looking
lookup stale: an entry is stored only when its plain values hash (the times excepted — a datetime
is immutable), so a test double with a list or dict where a string belongs is computed every time.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Generic, TypeVar

from fleet.core.model import Issue

T = TypeVar("T")

_ID = attrgetter("id")
_BODY = attrgetter("body")
_AUTHOR = attrgetter("author")
_AT = attrgetter("created_at")
_ASSOCIATION = attrgetter("association")
_EVENT = attrgetter("kind", "actor")
_EVENT_AT = attrgetter("at")

# (plain values that must hash, the times) of one issue, as the entry stores them.
_Check = tuple[tuple[object, ...], tuple[object, ...]]


def _check(issue: Issue) -> _Check:
    cs, es = issue.comments, issue.events
    plain = (
        tuple(map(_ID, cs)),
        tuple(map(_BODY, cs)),
        tuple(map(_AUTHOR, cs)),
        tuple(map(_ASSOCIATION, cs)),
        tuple(map(_EVENT, es)),
        issue.author,
        issue.author_association,
    )
    return plain, (tuple(map(_AT, cs)), tuple(map(_EVENT_AT, es)))


class IssueMemo(Generic[T]):
    """``recall(issue, compute)``: ``compute(issue)``, or the value it returned for an issue equal
    in its comments, events and author. At most ``size`` issues are held; when full it is cleared
    (the cheapest bound, and a sweep re-fills it in one cycle)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: dict[int, tuple[_Check, T]] = {}

    def recall(self, issue: Issue, compute: Callable[[Issue], T]) -> T:
        number = issue.number
        check = _check(issue)
        try:
            entry = self._entries.get(number)
        except TypeError:  # an unhashable number (a test double): nothing to key it by
            return compute(issue)
        if entry is not None and entry[0] == check:
            return entry[1]
        value = compute(issue)
        try:
            hash(check[0])
        except TypeError:  # a mutable value where a plain one belongs: never remembered
            return value
        if len(self._entries) >= self.size:
            self._entries.clear()
        self._entries[number] = (check, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
