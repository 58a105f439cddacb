"""Seed 001 §13's invariants, as they apply to the scheduler, each a property of its own over
generated snapshots (tests/strategies.py builds them with tests/builders.py).

- One decision per issue per plan: ``select`` never plans an issue twice, and every open issue gets
  exactly one of dispatch-or-a-named-state.
- A plan speaks only of the snapshot: every issue number in it is one of the snapshot's open issues.
- A plan is a function of the snapshot: the same snapshot (or an equal one decoded from a trace, or
  one whose probe listed the workers in another order) gives an equal plan.
- The capacity rule. fleet/core/select.py has no concurrency cap (D13): a worker with runs going is as
  eligible as an idle one, so there are no "free slots" to overrun. What holds instead: how busy the
  fleet is changes *where* work goes, never *whether* it goes; work goes only to healthy workers;
  and the tie-break spreads it — a dispatch never lands on a worker while another healthy candidate
  would end the plan two or more units lighter.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.core.model import Snapshot, Unit, Waiting
from fleet.core.select import healthy, live_load, select
from fleet.trace import to_jsonable
from fleet.trace.codec import decode_snapshot
from tests.strategies import boards

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _open(snap: Snapshot) -> set[int]:
    return {i.number for i in snap.issues if i.is_open}


@PROPERTY
@given(boards())
def test_one_decision_per_issue_per_plan(snap: Snapshot) -> None:
    plan = select(snap)
    sent = [d.issue for d in plan.dispatch]
    held = [w.issue for w in plan.waiting]
    assert len(sent) == len(set(sent)), f"an issue dispatched twice: {sent}"
    assert len(held) == len(set(held)), f"an issue given two states: {held}"
    assert not set(sent) & set(held), "an issue both dispatched and waiting"
    if plan.board_error is None:
        # Exactly one of dispatch-or-named-state for every open issue, and none for a closed one.
        assert sorted(sent + held) == sorted(_open(snap))
        assert all(w.state and w.reason and 0 <= w.predicate <= 11 for w in plan.waiting)
    else:  # an unreadable board decides nothing (D5): no issue is known, so none is decided
        assert not sent and not held


@PROPERTY
@given(boards())
def test_every_issue_in_the_plan_is_one_of_the_snapshots(snap: Snapshot) -> None:
    plan = select(snap)
    named = (
        [d.issue for d in plan.dispatch] + [w.issue for w in plan.waiting] + list(plan.tombstones)
    )
    assert set(named) <= _open(snap), set(named) - _open(snap)
    assert {d.worker for d in plan.dispatch} <= {w.name for w in snap.workers}


@PROPERTY
@given(boards(), st.randoms(use_true_random=False))
def test_a_plan_is_a_function_of_the_snapshot(snap: Snapshot, rnd) -> None:  # type: ignore[no-untyped-def]
    plan = select(snap)
    assert select(snap) == plan
    # The same value read back from a trace (what replay hands to select) plans the same.
    assert select(decode_snapshot(json.loads(json.dumps(to_jsonable(snap))))) == plan
    # The probe's listing order is not a decision input: the same issues go to the same workers
    # and wait in the same states. (Only a reason's wording may follow the listing: "running on
    # w2/agent, w1/agent" names the units in the order the probe found them.)
    workers = list(snap.workers)
    rnd.shuffle(workers)
    shuffled = select(replace(snap, workers=tuple(workers)))
    assert shuffled.dispatch == plan.dispatch
    assert _states(shuffled.waiting) == _states(plan.waiting)
    assert (shuffled.tombstones, shuffled.halts) == (plan.tombstones, plan.halts)


def _states(waiting: tuple[Waiting, ...]) -> list[tuple[int, int, str]]:
    return [(w.issue, w.predicate, w.state) for w in waiting]


@PROPERTY
@given(boards(), st.data())
def test_how_busy_the_fleet_is_changes_where_never_whether(snap: Snapshot, data) -> None:  # type: ignore[no-untyped-def]
    """D13: no cap. Live units of work this page does not hold, added anywhere, leave every
    issue's decision (dispatched or which named state) unchanged; only the chosen worker moves."""
    extra = {
        w.name: data.draw(st.integers(0, 5), label=f"extra units on {w.name}") for w in snap.workers
    }
    busier = replace(
        snap,
        workers=tuple(
            replace(
                w,
                units=w.units
                + tuple(Unit(1000 + k, w.name, "agent", "active", 1) for k in range(extra[w.name])),
            )
            for w in snap.workers
        ),
    )
    before, after = select(snap), select(busier)
    assert [d.issue for d in after.dispatch] == [d.issue for d in before.dispatch]
    assert after.waiting == before.waiting
    assert after.tombstones == before.tombstones


@PROPERTY
@given(boards())
def test_work_goes_only_to_healthy_workers(snap: Snapshot) -> None:
    pool = {w.name for w in healthy(snap.workers)}
    for d in select(snap).dispatch:
        assert d.worker in pool, d


@PROPERTY
@given(boards(lanes=False, halts=False))
def test_the_tie_break_spreads_work_across_healthy_workers(snap: Snapshot) -> None:
    """Without lanes every healthy worker is a candidate for every issue; choosing the least loaded
    each time means a worker that got work ends at most one unit above the lightest candidate."""
    plan = select(snap)
    pool = [w.name for w in healthy(snap.workers)]
    if not plan.dispatch:
        return
    load = live_load(snap.workers)
    final = Counter({name: load[name] for name in pool})
    final.update(d.worker for d in plan.dispatch)
    lightest = min(final[name] for name in pool)
    for name in {d.worker for d in plan.dispatch}:
        assert final[name] <= lightest + 1, (name, dict(final))
