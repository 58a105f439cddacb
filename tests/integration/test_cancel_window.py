"""The cancel window, forced: a dispatch whose fresh read falls between the runner's ``stopped``
and the cancel's ``cancelled`` must not start the cancelled issue again.

The cancel holds the fleet lock while it stops the unit and posts its marker. Its board's
``comment`` (the cancelled marker) waits until the dispatcher has read the issue, so the dispatcher
reads ``stopped`` as the last word with no unit live anywhere, then waits for the lock the cancel
holds — every time, not by luck. Real processes: the local worker's portable supervisor, the real
runner and the demo agent's ``hang`` mode, the real ``cancel()``, ``dispatch()`` and ``tick()``.
"""

from __future__ import annotations

import threading

import pytest

from fleet.context import FleetContext
from fleet.control.cancel import CancelReport, cancel
from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.dispatch import DispatchResult, dispatch
from fleet.observe import probe_fleet
from fleet.roles.sweeper import tick
from tests.cancel_window import WAIT_S, Window, cancel_board, dispatch_board
from tests.integration.fleet_fixture import Fleet, has_marker, kinds, wait_for

pytestmark = pytest.mark.timeout(120)


def _in_the_window(fleet: Fleet, n: int, act) -> tuple[DispatchResult | None, CancelReport]:  # type: ignore[no-untyped-def]
    """Cancel ``n`` in a thread; once it holds the lock, ``act(ctx)`` on the dispatcher's side."""
    path, origin = fleet.inventory.board.path, fleet.inventory.board.origin
    assert path is not None
    w = Window()
    reports: list[CancelReport] = []

    def cancelling() -> None:
        with FleetContext(fleet.inventory, cancel_board(path, origin, w)) as ctx:
            reports.append(cancel(ctx, n, author="ops", reason="wrong spec"))

    t = threading.Thread(target=cancelling)
    t.start()
    try:
        assert w.cancel_in_lock.wait(WAIT_S), "the cancel never reached its marker"
        with FleetContext(fleet.inventory, dispatch_board(path, origin, w)) as ctx:
            result = act(ctx)
    finally:
        w.dispatch_read.set()  # never leave the cancel waiting
        t.join(WAIT_S)
    assert reports, "the cancel did not finish"
    return result, reports[0]


def _start_hanging(fleet: Fleet) -> int:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    wait_for(fleet.board, n, has_marker(Kind.START))
    return n


def _nothing_live(fleet: Fleet, n: int) -> bool:
    return not any(u.issue == n and u.live for v in probe_fleet(fleet.ctx) for u in v.units)


def test_a_hand_dispatch_in_the_cancel_window_is_refused_under_the_lock(fleet: Fleet) -> None:
    n = _start_hanging(fleet)
    try:
        r, cancelled = _in_the_window(fleet, n, lambda ctx: dispatch(ctx, n, worker="w1"))
        assert cancelled.code is Exit.OK and cancelled.posted
        assert r is not None and (r.outcome, r.check, r.code) == (
            "refused",
            6,
            Exit.LATCHED_UNDER_LOCK,
        ), r.line()
        assert "cancelled" in r.reason
        issue = fleet.board.issue(n)
        assert issue is not None and kinds(issue) == [Kind.START, Kind.STOPPED, Kind.CANCELLED]
        assert _nothing_live(fleet, n)
    finally:
        fleet.stop("w1", n)


def test_a_sweep_whose_snapshot_fell_in_the_cancel_window_does_not_start_it_again(
    fleet: Fleet,
) -> None:
    n = _start_hanging(fleet)
    try:
        report, cancelled = _in_the_window(fleet, n, lambda ctx: tick(ctx, apply=True))
        assert cancelled.code is Exit.OK and cancelled.posted
        assert report is not None
        assert [d.issue for d in report.plan.dispatch] == [n]  # the snapshot saw `stopped`
        [r] = report.results
        assert (r.outcome, r.check, r.code) == ("refused", 6, Exit.LATCHED_UNDER_LOCK), r.line()
        issue = fleet.board.issue(n)
        assert issue is not None and kinds(issue) == [Kind.START, Kind.STOPPED, Kind.CANCELLED]
        assert _nothing_live(fleet, n)
    finally:
        fleet.stop("w1", n)
