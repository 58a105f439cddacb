"""The announcer's second job: one comment per ignored attempt to steer the fleet (issue 16).

A Loop on the engine, like the report filing beside it: ``fleet.core.notices`` decides (pure) from the
snapshot the announcer already read; each notice is claimed, the issue is re-read live, and the
comment is posted unless one of the fleet's own comments there already carries the notice's tag
(idempotent against the live board, never a cache, D14).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fleet.board.base import BoardError
from fleet.context import FleetContext
from fleet.core.model import Snapshot
from fleet.core.notices import Notice, notices, posted
from fleet.roles.engine import Failure, IndependentItems, Result


@dataclass
class NoticeOutcome:
    notice: Notice
    outcome: str  # would-post | posted | already-posted | failed


class Notifier(IndependentItems[Notice]):
    """select_queue decides from the announcer's snapshot; dispatch posts one notice."""

    def __init__(self, ctx: FleetContext, snap: Snapshot | None, *, apply: bool) -> None:
        self.ctx, self.apply = ctx, apply
        self.outcomes: dict[str, NoticeOutcome] = {}
        self._snap = snap

    def name(self) -> str:
        return "notifier"

    def select_queue(self) -> Sequence[Notice]:
        if self._snap is None or self._snap.board_error is not None:
            return ()
        snap, self._snap = self._snap, None  # one pass: the timer is the loop
        identity = self.ctx.inventory.policy.identity
        by_number = {i.number: i for i in snap.issues}
        for n in notices(snap):
            done = posted(by_number[n.issue], n, identity)
            self.outcomes[key(n)] = NoticeOutcome(n, "already-posted" if done else "would-post")
        if not self.apply:
            return ()
        return tuple(o.notice for o in self.outcomes.values() if o.outcome == "would-post")

    def _one(self, item: Notice) -> Result:
        identity = self.ctx.inventory.policy.identity
        try:
            fresh = self.ctx.board.issue(item.issue)
            if fresh is not None and posted(fresh, item, identity):
                return Result(True, "already posted", data={"posted": False})
            self.ctx.board.comment(item.issue, item.text())
        except BoardError as exc:
            return Result(False, f"{type(exc).__name__}: {exc}", Failure.RETRY)
        return Result(True, f"posted on #{item.issue}", data={"posted": True})

    def land(self, item: Notice, result: Result) -> None:
        if not result.ok:
            self.ctx.warn(f"fleet: announce: notice on #{item.issue}: {result.detail}")
            outcome = "failed"
        else:
            outcome = "posted" if result.data.get("posted") else "already-posted"
        self.outcomes[key(item)] = NoticeOutcome(item, outcome)

    def on_idle(self) -> bool:
        return False


def key(n: Notice) -> str:
    """A claim key safe as a file name."""
    return f"{n.issue}-{''.join(c if c.isalnum() or c in '-_' else '_' for c in n.key)}"
