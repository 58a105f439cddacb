"""The runner under an external signal (D12): the supervisor's stop SIGTERMs the unit, the runner
stops its agent, posts a ``stopped`` marker that claims nothing about the work, and no success,
no merged PR and no closed issue follow.
"""

from __future__ import annotations

import time

import pytest

from fleet.core.markers import Kind, history
from fleet.dispatch import dispatch
from tests.integration.fleet_fixture import Fleet, has_marker, kinds, wait_for

pytestmark = pytest.mark.timeout(90)

SETTLE_S = 1.0  # after the stopped marker: long enough for a stray late success to land


@pytest.mark.slow
def test_sigterm_posts_stopped_and_claims_nothing(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    try:
        wait_for(fleet.board, n, has_marker(Kind.START))
    finally:
        w = fleet.inventory.worker("w1")
        assert w is not None
        stop = fleet.ctx.supervisor(w).stop(n, timeout_s=10.0)
    assert stop.was_live, stop.detail
    assert stop.stopped, stop.detail
    issue = wait_for(fleet.board, n, has_marker(Kind.STOPPED), deadline_s=10.0)
    time.sleep(SETTLE_S)
    issue = fleet.board.issue(n)
    assert issue is not None
    assert kinds(issue) == [Kind.START, Kind.STOPPED]
    stopped = history(issue, "fleet").last_of(Kind.STOPPED)
    assert stopped is not None
    assert issue.is_open
    assert not any(pr.merged for pr in fleet.board.pull_requests_closing(n))  # type: ignore[attr-defined]
    assert [u for u in fleet.ctx.supervisor(w).probe() if u.issue == n and u.live] == []
