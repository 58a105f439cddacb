"""Issue 16 on the embedded board with an allow list: real board, real local workers, the demo agent.

The sweeper's path (``dispatch_batch``) re-asks approval (predicate 12) and the markers (6-8) of
its fresh read of each issue; a stranger's issue, approval, halt issue and release are each ignored
and named, an allow-listed person's of each works. (GitHub's associations: tests/github.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.dispatch import Request, dispatch_batch
from fleet.exits import Exit
from fleet.inventory import load
from fleet.markers import Kind, history, render
from fleet.model import Snapshot
from fleet.select import select
from tests.builders import worker
from tests.integration.test_dispatch import (
    Fleet,
    all_comments,
    has_marker,
    make_fleet,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

TRUST = "trust: {allow: [alice], agent_logins: [agent]}\n"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = make_fleet(tmp_path, ("w1",))
    with f.inventory_path.open("a", encoding="utf-8") as out:
        out.write(TRUST)
    inv = load(f.inventory_path)
    f.ctx.close()
    board = LocalBoard(inv.board.path, inv.board.origin, identity=inv.board.identity)  # type: ignore[arg-type]
    trusted = Fleet(f.root, f.inventory_path, inv, board, FleetContext(inv, board))
    try:
        yield trusted
    finally:
        trusted.ctx.close()


def _sweep_once(f: Fleet, n: int):  # type: ignore[no-untyped-def]
    before = all_comments(f.board)
    (r,) = dispatch_batch(f.ctx, [Request(n, "w1")])
    if not r.launched:
        assert all_comments(f.board) == before, "a refusal wrote to the board (D6)"
    return r


def test_the_sweepers_fresh_read_refuses_a_cancelled_issue(fleet: Fleet) -> None:
    """Before: dispatch_batch re-read the issue but asked only checks 1-5, so an issue the page
    misread (a cancel pushed out of GitHub's comment window) was launched again."""
    n = fleet.board.create_issue("Add a greeting", author="alice")
    fleet.board.comment(n, render(Kind.CANCELLED, {"by": "ops"}))
    r = _sweep_once(fleet, n)
    assert (r.outcome, r.code, r.check) == ("refused", Exit.LATCHED, None), r.line()
    assert "predicate 6" in r.line() and "cancelled" in r.line()


def test_a_strangers_issue_waits_for_an_allow_listed_approval(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Add a greeting", author="mallory")
    snap = Snapshot(
        fleet.ctx.clock(), fleet.board.read().issues, (worker("w1"),), fleet.inventory.policy
    )
    w = select(snap).reason_for(n)
    assert w is not None and (w.predicate, w.state) == (12, "unapproved"), w
    assert _sweep_once(fleet, n).code is Exit.UNAPPROVED
    # Self-approval and an agent's approval are named and ignored.
    fleet.board.comment(n, "fleet:approve", author="mallory")
    fleet.board.comment(n, "fleet:approve", author="agent")
    r = _sweep_once(fleet, n)
    assert r.code is Exit.UNAPPROVED and "agent login" in r.reason, r.line()
    # An allow-listed person's approval makes it work, and it runs to a merged success.
    fleet.board.comment(n, "Reviewed.\nfleet:approve", author="ALICE")
    assert _sweep_once(fleet, n).launched
    wait_for(fleet.board, n, has_marker(Kind.SUCCESS))


def test_a_strangers_halt_issue_and_release_are_ignored_an_allow_listed_ones_work(
    fleet: Fleet,
) -> None:
    work = fleet.board.create_issue("Add a greeting", author="alice")
    fleet.board.comment(work, render(Kind.CANCELLED, {"by": "ops"}))
    fleet.board.comment(work, "fleet:release", author="mallory")
    fleet.board.create_issue("HALT FLEET", "stop everything", author="mallory")
    issue = fleet.board.issue(work)
    assert issue is not None
    (ignored,) = history(issue, fleet.inventory.policy).ignored
    assert (ignored.what, ignored.author) == ("release", "mallory")
    assert _sweep_once(fleet, work).code is Exit.LATCHED  # the stranger's release did nothing
    fleet.board.comment(work, "fleet:release", author="alice")
    r = _sweep_once(fleet, work)  # and the stranger's halt issue halts nothing
    assert r.launched, r.line()
    wait_for(fleet.board, work, has_marker(Kind.SUCCESS))
    other = fleet.board.create_issue("Add another greeting", author="alice")
    fleet.board.create_issue("HALT FLEET", "really stop", author="alice")
    assert _sweep_once(fleet, other).code is Exit.HALTED_ISSUE
