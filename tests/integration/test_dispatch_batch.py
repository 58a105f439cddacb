"""``dispatch_batch()`` and the sweeper's tick that hands it the plan, on the embedded default: real
board, real local workers under the portable supervisor, the demo agent.

A batch shares the pre-flight's round trips (one fleet probe for checks 8 and 4, one sync per
worker, one lock hold across one duplicate probe and every claim); every request still gets the
answer ``dispatch()`` would give it, with the same check and code (D15, D20).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.dispatch import Request, dispatch, dispatch_batch
from fleet.inventory import Inventory
from fleet.roles.sweeper import tick
from tests.integration.fleet_fixture import Fleet, has_marker, make_fleet, wait_for

pytestmark = pytest.mark.timeout(180)

WAIT_S = 30.0  # bound on every wait for a thread or a run in this file


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = make_fleet(tmp_path, ("w1", "w2"))
    try:
        yield f
    finally:
        f.ctx.close()


def _done(issue) -> bool:  # type: ignore[no-untyped-def]
    return not issue.is_open and has_marker(Kind.SUCCESS)(issue)


def test_a_batch_launches_every_request_under_one_lock_hold(fleet: Fleet) -> None:
    numbers = [fleet.board.create_issue(f"Add greeting {i}", "body") for i in range(3)]
    requests = [Request(numbers[0], "w1"), Request(numbers[1], "w2"), Request(numbers[2])]
    results = dispatch_batch(fleet.ctx, requests)
    assert [r.issue for r in results] == numbers
    assert all(r.launched for r in results), [r.line() for r in results]
    assert [r.worker for r in results[:2]] == ["w1", "w2"]
    assert results[2].worker in ("w1", "w2")
    held = {r.timings["lock_held_s"] for r in results}
    assert len(held) == 1, "one hold of the fleet lock covers every claim of the batch"
    hold = held.pop()
    assert all(0 <= r.timings["probe_to_live_s"] <= hold for r in results)
    for n in numbers:
        wait_for(fleet.board, n, _done)


def test_refusals_in_a_batch_are_dispatch_s_own(fleet: Fleet) -> None:
    """Each refused request gets dispatch()'s check and code; the good one still launches."""
    closed = fleet.board.create_issue("Closed already")
    fleet.board.close(closed)
    dnd = fleet.board.create_issue("Later [do-not-dispatch]")
    blocker = fleet.board.create_issue("Blocker")
    blocked = fleet.board.create_issue("Blocked")
    fleet.board.add_blocker(blocked, blocker)  # type: ignore[attr-defined]
    good = fleet.board.create_issue("Add a greeting")
    requests = [
        Request(closed, "w1"),
        Request(9999, "w1"),
        Request(dnd, "w2"),
        Request(blocked, "w1"),
        Request(good, "nowhere"),
        Request(good, "w2"),
    ]
    results = dispatch_batch(fleet.ctx, requests)
    got = [(r.check, r.code) for r in results]
    assert got[:5] == [
        (2, Exit.ISSUE_CLOSED),
        (1, Exit.ISSUE_MISSING),
        (3, Exit.DO_NOT_DISPATCH),
        (5, Exit.BLOCKED),
        (None, Exit.NO_SUCH_WORKER),
    ]
    assert results[5].launched, results[5].line()
    # The same answers through the one-at-a-time path (the do-not-dispatch notice is posted once).
    for req, batched in zip(requests[:5], results[:5], strict=True):
        single = dispatch(fleet.ctx, req.issue, worker=req.worker)
        assert (single.check, single.code) == (batched.check, batched.code)
    wait_for(fleet.board, good, _done)


def test_one_issue_twice_in_a_batch_launches_once(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", labels=["demo:hang"])
    try:
        results = dispatch_batch(fleet.ctx, [Request(n, "w1"), Request(n, "w2"), Request(n, "w1")])
        assert [r.launched for r in results] == [True, False, False], [r.line() for r in results]
        assert (results[1].check, results[1].code) == (6, Exit.HELD_OTHER_WORKER)
        # The later batch re-reads the issue: its start marker may already say a run is going.
        assert results[2].code in (Exit.HELD_LIVE, Exit.HELD_OTHER_WORKER, Exit.LATCHED), results[
            2
        ].line()
    finally:
        fleet.stop("w1", n)


def test_a_run_live_elsewhere_is_refused_by_check_6_under_the_lock(fleet: Fleet) -> None:
    held = fleet.board.create_issue("Fault: hang", labels=["demo:hang"])
    first = dispatch(fleet.ctx, held, worker="w1")
    try:
        assert first.launched, first.line()
        wait_for(fleet.board, held, has_marker(Kind.START))
        # An operator's release clears the start latch the sweeper's fresh read would refuse on;
        # the live unit is still there, and only check 6 under the lock can see it.
        fleet.board.comment(held, "fleet:release", author="operator")
        other = fleet.board.create_issue("Add a greeting")
        results = dispatch_batch(fleet.ctx, [Request(held, "w2"), Request(other, "w2")])
        assert (results[0].check, results[0].code) == (6, Exit.HELD_OTHER_WORKER)
        assert results[1].launched, results[1].line()
        wait_for(fleet.board, other, _done)
    finally:
        fleet.stop("w1", held)


@pytest.mark.slow
def test_a_tick_hands_its_whole_plan_to_the_one_path_as_one_batch(fleet: Fleet) -> None:
    """The sweeper's plan reaches ``dispatch_batch`` in one call: one lock hold covers every claim
    of the tick, and each launch says the batch it came in."""
    numbers = [fleet.board.create_issue(f"Add greeting {i}", "body") for i in range(6)]
    report = tick(fleet.ctx, apply=True)
    assert report.outcome == "dispatched", report
    assert sorted(r.issue for r in report.results) == numbers
    assert all(r.launched for r in report.results), [r.line() for r in report.results]
    assert {r.timings["batch"] for r in report.results} == {6.0}
    assert len({r.timings["lock_held_s"] for r in report.results}) == 1
    for n in numbers:
        wait_for(fleet.board, n, _done)


@pytest.mark.slow
def test_two_ticks_at_once_launch_each_planned_issue_exactly_once(fleet: Fleet) -> None:
    """Two sweepers tick over the same plan at the same moment, on two boxes: their engine claims
    live in their own state directories, so only what they share decides — the one path's
    fleet-wide lock, its re-read of the last word, and the unit name. Every issue is launched
    once and runs once; the other tick's answer for it is a loser's refusal, never a start."""
    numbers = [fleet.board.create_issue(f"Add greeting {i}", "body") for i in range(4)]
    start = threading.Barrier(2)
    reports: list[object] = []

    other_box = replace(fleet.inventory, state_dir=str(fleet.root / "state-of-another-box"))

    def one_tick(inv: Inventory) -> None:
        with FleetContext(inv, open_board(inv)) as ctx:
            start.wait(WAIT_S)
            reports.append(tick(ctx, apply=True))

    threads = [threading.Thread(target=one_tick, args=(i,)) for i in (fleet.inventory, other_box)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 4)
    assert len(reports) == 2
    launched = [r.issue for rep in reports for r in rep.results if r.launched]  # type: ignore[attr-defined]
    assert sorted(launched) == numbers, [r.line() for rep in reports for r in rep.results]  # type: ignore[attr-defined]
    losers = {r.code for rep in reports for r in rep.results if not r.launched}  # type: ignore[attr-defined]
    assert losers <= {Exit.HELD_LIVE, Exit.HELD_OTHER_WORKER, Exit.LATCHED, Exit.LATCHED_UNDER_LOCK}
    assert sum(len(rep.results) for rep in reports) == 2 * len(numbers)  # type: ignore[attr-defined]
    for n in numbers:
        done = wait_for(fleet.board, n, _done)
        assert sum("fleet:start" in c.body for c in done.comments) == 1, done.comments
