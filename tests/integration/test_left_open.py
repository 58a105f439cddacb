"""D6's left-open marker, posted by the runner's close-out: a run whose PR merged while the issue
stays open on purpose (declared in the results file) ends ``success`` then ``left-open``, so the
open issue is neither a tombstone nor latched; without the declaration the success stays last."""

from __future__ import annotations

import pytest

from fleet.agents.demo import GO_LABEL
from fleet.core.markers import Kind, history, is_tombstone
from fleet.core.select import select
from fleet.dispatch import dispatch
from fleet.observe import snapshot
from tests.integration.fleet_fixture import Fleet, has_marker, kinds, wait_for

pytestmark = pytest.mark.timeout(120)


def test_a_run_that_leaves_its_issue_open_on_purpose_posts_left_open(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Part one of two", labels=["demo:left-open"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    wait_for(fleet.board, n, lambda i: not i.is_open)  # the agent's PR merged and closed it
    fleet.board.reopen(n)  # open again, as a merge into another branch leaves it on GitHub
    fleet.board.add_labels(n, [GO_LABEL])  # the agent may end now
    issue = wait_for(fleet.board, n, has_marker(Kind.LEFT_OPEN))
    assert kinds(issue) == [Kind.START, Kind.SUCCESS, Kind.LEFT_OPEN]
    h = history(issue, "fleet")
    m = h.last_marker
    assert m is not None and m.kind is Kind.LEFT_OPEN and m.get("run") == r.run_id
    assert (m.get("pr") or "").startswith("#") and "part two" in m.note
    assert issue.is_open and not is_tombstone(issue, h)
    plan = select(snapshot(fleet.ctx))
    assert plan.reason_for(n) is None or plan.reason_for(n).state != "tombstone"  # type: ignore[union-attr]
    assert n not in plan.tombstones
