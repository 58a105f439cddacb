"""repair_plan(units): oldest wins (D4) — monotonic start on one host, wall clock across hosts,
ties by (worker, master) name — and the superseded marker that follows a stop: not a failure, and
not a latch that frees the issue while the kept unit still runs."""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.cmd.hygiene import repair_lines
from fleet.core.markers import LATCHING, Kind, history, parse
from fleet.core.model import Comment, Unit, WaitState
from fleet.core.repair import ORDER, RepairDecision, repair_plan, superseded_marker
from fleet.core.select import select
from fleet.roles.repairer import RepairReport, plan_from, replay_repair
from fleet.runner.closeout import NOT_FAILURES
from fleet.runner.outcome import Outcome
from fleet.trace import to_jsonable
from tests.builders import FLEET, NOW, T0, comment, issue, marker, snapshot, worker
from tests.builders import unit as spec

FAST = settings(max_examples=200, deadline=None)


def u(
    issue: int = 1,
    on: str = "w1",
    master: str = "agent",
    start_us: int = 100,
    at_s: int | None = 0,
    state: str = "active",
) -> Unit:
    at = None if at_s is None else T0 + timedelta(seconds=at_s)
    return Unit(issue, on, master, state, start_us, at)


def only(units: list[Unit], hosts: dict[str, str] | None = None) -> RepairDecision:
    (d,) = repair_plan(units, hosts)
    return d


# -- the table ----------------------------------------------------------------------------------


def test_two_masters_on_one_box_compare_monotonic_starts() -> None:
    older, newer = u(on="w1", master="alice", start_us=500, at_s=9), u(on="w2", start_us=900)
    # the wall clock says the opposite (it stepped); one kernel's monotonic clock does not step
    d = only([newer, older], {"w1": "box", "w2": "box"})
    assert d.keep == older and d.stop == (newer,)
    assert "500 µs monotonic" in d.why


def test_across_hosts_the_wall_clock_decides() -> None:
    a = u(on="w1", start_us=10, at_s=50)  # booted later: a small monotonic number says nothing
    b = u(on="w2", start_us=99_999, at_s=20)
    d = only([a, b])  # no host map: every worker is its own host
    assert d.keep == b and d.stop == (a,)
    assert "wall clock" in d.why


def test_each_hosts_oldest_meets_the_others_by_wall_clock() -> None:
    b1 = u(on="b1", start_us=7, at_s=30)
    b2 = u(
        on="b2", start_us=3, at_s=40
    )  # b's oldest by monotonic, although its wall clock is later
    c = u(on="c", start_us=1, at_s=35)
    d = only([b1, b2, c], {"b1": "b", "b2": "b", "c": "c"})
    assert d.keep == c  # b2 (b's oldest) started at 40 s, c at 35 s
    assert set(d.stop) == {b1, b2}


def test_a_tie_is_broken_by_name_and_says_so() -> None:
    x, y = u(on="w2", start_us=5), u(on="w1", start_us=5)
    d = only([x, y], {"w1": "box", "w2": "box"})
    assert d.keep == y and "tie: broken by name" in d.why
    d = only([u(on="w2", at_s=1), u(on="w1", at_s=1)])
    assert d.keep is not None and d.keep.worker == "w1" and "tie" in d.why
    assert "ties" in ORDER and "(worker, master)" in ORDER


def test_an_unknown_start_time_leaves_it_undecided_and_stops_nothing() -> None:
    d = only([u(on="w1", start_us=0), u(on="w2")], {"w1": "box", "w2": "box"})
    assert (d.keep, d.stop, d.decided) == (None, (), False)
    assert "monotonic start unknown" in d.why
    d = only([u(on="w1", at_s=None), u(on="w2")])
    assert not d.decided and "wall-clock start unknown" in d.why
    # an unknown time nobody needs decides nothing: one unit per host, wall clocks known
    assert only([u(on="w1", start_us=0, at_s=1), u(on="w2", start_us=0, at_s=2)]).decided


def test_one_live_unit_or_ended_ones_need_no_repair() -> None:
    assert repair_plan([u(1), u(2, on="w2")]) == ()
    assert repair_plan([u(on="w1"), u(on="w2", state="failed"), u(on="w3", state="inactive")]) == ()
    assert repair_plan([u(), u()]) == ()  # one unit seen twice is not a duplicate


# -- the superseded marker ----------------------------------------------------------------------


def _after_repair(kept_live: bool):  # type: ignore[no-untyped-def]
    """Two runs started; the younger was stopped (its runner said ``stopped``) and superseded."""
    keep, dup = u(on="w1", start_us=1), u(on="w2", start_us=2)
    d = only([keep, dup], {"w1": "box", "w2": "box"})
    text = superseded_marker(d, dup)
    i = issue(
        1,
        timeline=[
            marker(Kind.START, {"worker": "w1"}),
            marker(Kind.START, {"worker": "w2"}),
            marker(Kind.STOPPED, {"signal": "SIGTERM"}),  # the stopped runner's own word (D12)
            comment(text, author=FLEET),  # posted after the stop returned: the later word
        ],
    )
    units = [spec(1, master="agent")] if kept_live else []
    return d, text, i, snapshot(i, workers=[worker("w1", units=units), worker("w2")])


def test_the_superseded_marker_names_the_kept_unit_and_is_no_failure() -> None:
    _, text, _, _ = _after_repair(True)
    m = parse(Comment(1, FLEET, text, NOW))
    assert m is not None and m.kind is Kind.SUPERSEDED
    assert m.fields == {"kept": "w1/agent", "stopped": "w2/agent"}
    assert "not a failure" in m.note
    assert Kind.SUPERSEDED not in LATCHING
    assert Kind.FAILED.value not in text.splitlines()[0]
    assert Outcome.STOPPED in NOT_FAILURES  # the stopped runner's own close-out is no failure


def test_superseded_is_the_last_word_and_the_kept_unit_holds_the_issue() -> None:
    _, _, i, snap = _after_repair(True)
    h = history(i, FLEET)
    assert h.last_marker is not None and h.last_marker.kind is Kind.SUPERSEDED
    (w,) = select(snap).waiting
    assert w.state == WaitState.RUNNING and "w1/agent" in w.reason


def test_once_the_kept_unit_is_gone_the_issue_is_eligible_again() -> None:
    _, _, _, snap = _after_repair(False)
    assert [d.issue for d in select(snap).dispatch] == [1]


# -- properties ---------------------------------------------------------------------------------

WORKERS = ("w1", "w2", "w3", "w4")


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[Unit], dict[str, str]]:
    hosts = {w: draw(st.sampled_from(["h1", "h2", "h3"])) for w in WORKERS}
    units = draw(
        st.lists(
            st.builds(
                u,
                issue=st.integers(1, 3),
                on=st.sampled_from(WORKERS),
                master=st.sampled_from(["alice", "bob"]),
                start_us=st.integers(0, 6),  # small: ties and unknowns (0) are common here
                at_s=st.one_of(st.none(), st.integers(0, 4)),
                state=st.sampled_from(["active", "activating", "deactivating", "failed"]),
            ),
            max_size=10,
            unique_by=lambda x: (x.issue, x.worker, x.master),  # one name per master (D4)
        )
    )
    return units, hosts


def _distinct_live(units: list[Unit], issue: int) -> dict[tuple[str, str], Unit]:
    out: dict[tuple[str, str], Unit] = {}
    for x in units:
        if x.live and x.issue == issue:
            out.setdefault((x.worker, x.master), x)
    return out


@FAST
@given(fleets())
def test_one_decision_per_duplicated_issue_keeping_exactly_one(fx) -> None:  # type: ignore[no-untyped-def]
    units, hosts = fx
    plan = repair_plan(units, hosts)
    dup = sorted(n for n in {x.issue for x in units} if len(_distinct_live(units, n)) > 1)
    assert [d.issue for d in plan] == dup
    for d in plan:
        live = set(_distinct_live(units, d.issue).values())
        if d.decided:
            assert d.keep in live and d.keep not in d.stop
            assert {d.keep, *d.stop} == live and len(d.stop) == len(live) - 1
        else:
            assert d.stop == () and d.why.startswith("undecided")


@FAST
@given(fleets())
def test_the_kept_unit_is_the_oldest(fx) -> None:  # type: ignore[no-untyped-def]
    units, hosts = fx
    for d in repair_plan(units, hosts):
        if not d.decided:
            continue
        keep = d.keep
        assert keep is not None
        mono = (keep.start_us, keep.worker, keep.master)
        for other in d.stop:
            if hosts[other.worker] == hosts[keep.worker]:
                assert mono < (other.start_us, other.worker, other.master)
            else:
                peers = [x for x in (keep, *d.stop) if hosts[x.worker] == hosts[other.worker]]
                champ = min(peers, key=lambda x: (x.start_us, x.worker, x.master))
                assert champ.started_at is not None and keep.started_at is not None
                assert (keep.started_at, keep.worker, keep.master) < (
                    champ.started_at,
                    champ.worker,
                    champ.master,
                )


@FAST
@given(fleets(), st.randoms(use_true_random=False))
def test_the_order_is_total_the_input_order_never_matters(fx, rnd: random.Random) -> None:  # type: ignore[no-untyped-def]
    units, hosts = fx
    shuffled = list(units)
    rnd.shuffle(shuffled)
    a, b = repair_plan(units, hosts), repair_plan(shuffled, hosts)
    assert a == b


def test_a_recorded_repair_replays_and_a_tampered_one_differs() -> None:
    views = (
        worker("w1", units=[spec(1, start_us=5)]),
        worker("w2", units=[spec(1, start_us=9)]),
    )
    hosts = {"w1": "box", "w2": "box"}
    plan = plan_from(views, hosts)
    record = {"workers": to_jsonable(views), "hosts": hosts, "decisions": to_jsonable(plan)}
    assert replay_repair(record).differences == ()
    (d,) = record["decisions"]
    flipped = {**d, "keep": d["stop"][0], "stop": [d["keep"]]}
    (diff,) = replay_repair({**record, "decisions": [flipped]}).differences
    assert diff.recorded.startswith("keep w2") and diff.now.startswith("keep w1")


def test_the_dry_run_says_who_would_be_kept_and_why_and_states_the_tie_rule() -> None:
    plan = repair_plan([u(on="w2", start_us=9), u(on="w1", start_us=5)], {"w1": "b", "w2": "b"})
    lines = repair_lines(RepairReport("dry-run", plan, unchecked=("w3 (unreachable: x)",)), False)
    assert lines[1] == f"  {ORDER}"
    assert "could not check worker w3" in lines[2]
    assert lines[3].startswith(
        "  #1: keep w1/agent, would stop w2/agent — keep w1/agent: on host b"
    )
