"""The Board Protocol: the queue (issue tracker) and the forge (pull requests) behind one contract.

The tracker IS the queue (D1): nothing caches its state, so every caller reads it live. One Protocol,
many backends (huey's storage contract): the embedded SQLite board (``local.py``) and GitHub
(``github.py``) both pass the same contract suite in ``tests/contract``.

Errors: a backend raises :class:`BoardUnreadable` when the queue itself cannot be read (the one place
fleet fails closed, D5) and :class:`BoardWriteError` when a write did not take. A missing issue is
``None``, never an exception: "no such issue" and "the read broke" are different facts (D20).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from fleet.core.model import CIState, Comment, Issue, Mention, PullRequest, StateReason


class BoardError(Exception):
    """Base of the board's I/O failures."""


class BoardUnreadable(BoardError):
    """The queue could not be read: no eligibility decision can be made from it."""


class BoardWriteError(BoardError):
    """A write (comment, close, label) did not take; the caller must not assume it did."""


class LabelsDropped(BoardWriteError):
    """An issue was filed but GitHub silently dropped labels or assignees it was filed with (it
    does so for a user without push access). A probe without its fixture label, or a report
    without its hold label, is dispatchable work (predicate 9), so the issue was closed at once."""

    def __init__(self, message: str, number: int, missing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.number = number
        self.missing = missing


class IdentityMismatch(BoardWriteError):
    """The credential writes as another login than the inventory's ``identity``: every marker it
    posted would be someone else's words to the fleet (attempt cap and "already running" would
    stop working), so nothing is written (D20: its own name, not a write that failed)."""


@dataclass(frozen=True)
class Skipped:
    """A board item the read could not see: kept out of the queue and named, never dropped in
    silence. "No such item" and "an item we may not read" are different facts (D20)."""

    item: str  # the board's id for the item, or where it sat when it had none
    reason: str  # a short closed name: FORBIDDEN, NOT_FOUND, SAML, ...
    message: str  # the backend's own words


@dataclass(frozen=True)
class BoardPage:
    """One cycle's read of the queue: every open issue (with comments and events) on the board.

    ``cost`` is what the read cost in the backend's own unit (GraphQL points on GitHub, statements on
    SQLite); ``fleet-status --cost`` prints it so every field added to the read is cost-measured (D1).
    """

    issues: tuple[Issue, ...]
    read_at: datetime
    cost: int = 0
    cost_unit: str = ""
    skipped: tuple[Skipped, ...] = ()  # items the read could not see (GitHub's partial answers)


@runtime_checkable
class Board(Protocol):
    """What fleet needs from a tracker + forge. Every method is one logical round trip."""

    identity: str  # the fleet's own login: author of markers, target of mentions

    # -- the queue -------------------------------------------------------------------------------
    def read(self) -> BoardPage:
        """The one paginated read per cycle (D1): all open issues with comments and events."""
        ...

    def issue(self, number: int) -> Issue | None:
        """A fresh read of one issue (open or closed), for pre-flight and the runner's check 11."""
        ...

    def create_issue(
        self,
        title: str,
        body: str = "",
        *,
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
        lane: str | None = None,
        status: str | None = "Todo",
        author: str | None = None,
    ) -> int:
        """File an issue and return its number. Labels apply atomically with the filing, so a
        probe carries the fixture label from birth (predicate 9)."""
        ...

    def comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        """Post a comment and return it as stored (verified posted, even on a closed issue, D12)."""
        ...

    def close(self, number: int, reason: StateReason = StateReason.COMPLETED) -> None: ...

    def reopen(self, number: int, *, author: str | None = None) -> None:
        """Reopen; ``author`` as for :meth:`comment` (GitHub writes as the token's user). A reopen
        outranks older markers only when its actor is a trusted human (fleet.core.trust)."""
        ...

    def add_labels(self, number: int, labels: Sequence[str]) -> None: ...

    def remove_label(self, number: int, label: str) -> None: ...

    def assign(self, number: int, assignees: Sequence[str]) -> None: ...

    def set_status(self, number: int, status: str) -> None: ...

    def set_lane(self, number: int, lane: str | None) -> None: ...

    def set_parent(self, child: int, parent: int | None) -> None: ...

    def add_blocker(self, number: int, blocked_by: int) -> None: ...

    def remove_blocker(self, number: int, blocked_by: int) -> None: ...

    # -- the forge -------------------------------------------------------------------------------
    def pull_requests_closing(self, number: int) -> tuple[PullRequest, ...]:
        """Every PR (open, closed or merged, any repository) whose body has a real closing
        reference to this issue. Attribution by time is the caller's job (D16)."""
        ...

    def ci_status(self) -> CIState:
        """The target's CI on main; UNKNOWN when it cannot be read (never treated as red)."""
        ...

    # -- mentions (D19) --------------------------------------------------------------------------
    def unread_mentions(self, number: int) -> tuple[Mention, ...]: ...

    def mark_mentions_read(self, ids: Sequence[int]) -> None: ...
