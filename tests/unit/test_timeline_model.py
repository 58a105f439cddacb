"""The timeline's data is a pure function of markers and trace: table tests and properties."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.markers import Kind, render
from fleet.core.model import Comment, Issue
from fleet.timeline.model import RUNNING, Flag, WorkerRef, build, runs_of
from fleet.timeline.trace_view import bands_of, darks_of, sweeps_of
from tests.builders import FLEET, issue, marker, reopen

T = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T + timedelta(seconds=s)


def start(run: str, worker: str = "w1", master: str = "alpha", *, s: float) -> Comment:
    fields = {"run": run, "worker": worker, "master": master, "unit": "task-1"}
    return marker(Kind.START, fields, at=at(s))


def term(kind: Kind, *, s: float, **fields: object) -> Comment:
    return marker(kind, fields, "a note", at=at(s))


def one(*timeline: object, number: int = 1) -> list:
    return runs_of(issue(number, timeline=timeline), FLEET)  # type: ignore[arg-type]


# -- table -------------------------------------------------------------------------------------


def test_a_run_is_its_start_and_its_terminal():
    (r,) = one(start("r1", s=0), term(Kind.SUCCESS, s=30, run="r1", pr="#4"))
    assert (r.run_id, r.worker, r.master, r.outcome) == ("r1", "w1", "alpha", "success")
    assert (r.start, r.end) == (at(0), at(30))
    assert "fleet:success" in r.terminal_text and "pr=#4" in r.terminal_text
    assert r.flags == frozenset()


def test_a_run_with_no_terminal_is_open_and_drawn_to_now():
    (r,) = one(start("r1", s=0))
    assert r.end is None and r.outcome == RUNNING
    assert r.until(at(100)) == at(100) and r.duration_s(at(100)) == 100


def test_a_superseded_duplicate_is_the_stopped_one_and_the_kept_run_goes_on():
    runs = one(
        start("old", "w1", s=0),
        start("dup", "w2", s=5),
        term(Kind.SUPERSEDED, s=9, kept="w1/alpha", stopped="w2/alpha"),
        term(Kind.SUCCESS, s=40),  # an older runner's terminal without run=: oldest open start
    )
    by = {r.run_id: r for r in runs}
    assert by["dup"].outcome == "superseded" and Flag.SUPERSEDED in by["dup"].flags
    assert Flag.DUPLICATE in by["dup"].flags and Flag.DUPLICATE not in by["old"].flags
    assert by["old"].outcome == "success" and by["old"].end == at(40)


def test_a_reaped_start_is_flagged_and_named_by_its_run():
    runs = one(
        start("r1", s=0),
        term(Kind.REAPED, s=7200, run="r1", worker="w1", start=1),
        start("r2", s=7300),
        term(Kind.FAILED, s=7400, run="r2", exit=1),
    )
    assert [(r.run_id, r.outcome) for r in runs] == [("r1", "reaped"), ("r2", "failed")]
    assert Flag.REAPED in runs[0].flags and Flag.REAPED not in runs[1].flags


def test_a_reopen_starts_a_fresh_run_and_ends_nothing():
    runs = one(
        start("r1", s=0),
        term(Kind.SUCCESS, s=10, run="r1"),
        reopen(at=at(20)),
        start("r2", s=30),
    )
    assert [(r.run_id, r.outcome) for r in runs] == [("r1", "success"), ("r2", RUNNING)]
    assert Flag.AFTER_REOPEN in runs[1].flags and Flag.AFTER_REOPEN not in runs[0].flags


def test_a_parked_retry_carries_its_due_and_the_retry_is_its_own_run():
    due = at(130)
    runs = one(
        start("r1", s=0),
        term(Kind.PARKED, s=10, run="r1", due=due.isoformat()),
        start("r2", s=140),
        term(Kind.SUCCESS, s=200, run="r2"),
    )
    assert runs[0].outcome == "parked" and runs[0].parked_due == due
    assert runs[1].outcome == "success" and runs[1].parked_due is None


def test_a_cancel_ends_every_open_run_of_the_issue():
    runs = one(start("a", "w1", s=0), start("b", "w2", s=1), term(Kind.CANCELLED, s=5, by="al"))
    assert {r.outcome for r in runs} == {"cancelled"}


def test_a_terminal_stamped_before_its_start_is_zero_long_and_says_so():
    # The worker that stamped the start runs ten minutes ahead of the reaper's box.
    runs = one(start("r1", s=600), term(Kind.REAPED, s=0, run="r1"))
    (r,) = runs
    assert r.outcome == "reaped" and r.end == r.start and Flag.CLOCK_SKEW in r.flags


def test_capacity_terminal_opens_a_dark_period_that_a_later_start_closes():
    runs = one(
        start("r1", "w2", s=0),
        term(Kind.CAPACITY, s=10, run="r1", source="rate_limit", reset=at(3600).isoformat()),
        start("r2", "w2", s=4000),
    )
    (d,) = darks_of([], runs, at(5000))
    assert (d.worker, d.source, d.start, d.end, d.ongoing) == (
        "w2",
        "rate_limit",
        at(10),
        at(4000),
        False,
    )
    assert d.reset == at(3600).isoformat()


def _sweep(s: float, *workers: dict, halts=()) -> dict:
    return {
        "event": "SWEEP",
        "at": at(s).isoformat(),
        "apply": True,
        "summary": "dispatch=0",
        "snapshot": {"workers": list(workers), "halts": list(halts)},
    }


def _tick(
    s: float, outcome="idle", launched=(), refused=(), pause=None, drain=None, halts=()
) -> dict:
    return {
        "event": "TICK",
        "at": at(s).isoformat(),
        "apply": True,
        "outcome": outcome,
        "summary": "s",
        "launched": [{"issue": n, "worker": w} for n, w in launched],
        "refused": [{"issue": n, "code": c, "reason": "why"} for n, c in refused],
        "switches": {"pause": pause, "drain": drain},
        "halts": list(halts),
    }


def test_sweeps_come_from_tick_records_with_what_they_launched_and_refused():
    trace = [_sweep(0), _tick(1, "dispatched", [(3, "w1")], [(4, 24)]), _tick(300)]
    s1, s2 = sweeps_of(trace)
    assert s1.launched == ((3, "w1"),) and [(f.issue, f.code) for f in s1.refused] == [(4, 24)]
    assert s2.outcome == "idle" and not s2.launched


def test_an_older_trace_without_ticks_still_draws_its_sweeps_from_land_records():
    trace = [
        _sweep(0),
        {"event": "LAND", "at": at(1).isoformat(), "loop": "sweeper", "item": "3", "ok": True},
        {
            "event": "LAND",
            "at": at(2).isoformat(),
            "loop": "sweeper",
            "item": "4",
            "ok": False,
            "detail": "refused by check 4",
        },
    ]
    (s,) = sweeps_of(trace)
    assert s.launched == ((3, "?"),) and s.refused[0].issue == 4


def test_halt_pause_and_drain_are_bands_from_first_to_first_gone():
    halt = {
        "source": "file",
        "reason": "bad deploy",
        "author": "al",
        "where": "/x/HALT",
        "since": at(-50).isoformat(),
    }
    pause = {"reason": "window", "author": "al", "since": None}
    trace = [  # a halted or held tick reads no board: its TICK record is all there is
        _tick(1, "halted", halts=[halt]),
        _tick(301, "halted", halts=[halt]),
        _tick(601, "paused", pause=pause),
        _sweep(900),
        _tick(901, "paused", pause=pause),
        _sweep(1200),
        _tick(1201, "draining", drain={"reason": None}),
    ]
    bands = bands_of(trace, at(1500))
    kinds = [(b.kind, b.start, b.end, b.ongoing) for b in bands]
    assert kinds == [
        ("halt", at(-50), at(601), False),  # from the switch's own since
        ("pause", at(601), at(1201), False),
        ("drain", at(1201), at(1500), True),
    ]
    assert "bad deploy" in bands[0].label and "no reason was recorded" in bands[2].label


def test_an_older_trace_draws_its_halts_from_the_sweep_snapshots():
    halt = {"source": "issue", "reason": None, "where": "#9", "since": None}
    trace = [_sweep(0, halts=[halt]), _sweep(300, halts=[halt]), _sweep(600)]
    (band,) = bands_of(trace, at(900))
    assert (band.kind, band.start, band.end) == ("halt", at(0), at(600))
    assert "no reason was recorded" in band.label


def test_the_sweepers_own_tick_record_draws_its_halt_and_its_pause(tmp_path):
    """The production record (fleet.roles.sweeper.tick_record) through a real trace file."""
    from fleet.control.switches import Switch, Switches
    from fleet.core.model import Halt, Plan
    from fleet.roles.sweeper import TickReport, tick_record
    from fleet.trace import Trace, read_trace

    trace = Trace(tmp_path / "trace.jsonl")
    halt = Halt("file", "bad deploy", at(-60), "al", "/x/HALT")
    off = Switches(None, None, None)
    paused = Switches(None, Switch("PAUSE", "/x/PAUSE", "window", "al", at(0)), None)
    trace.event("TICK", **tick_record(TickReport("halted", Plan(halts=(halt,))), off, apply=True))
    trace.event("TICK", **tick_record(TickReport("paused", Plan()), paused, apply=True))
    bands = bands_of(read_trace(tmp_path / "trace.jsonl"), datetime.now(UTC))
    assert [(b.kind, b.ongoing) for b in bands] == [("halt", False), ("pause", True)]
    assert bands[0].start == at(-60) and "bad deploy" in bands[0].label and "al" in bands[1].label


def test_a_worker_a_sweep_could_not_reach_neither_opens_nor_closes_a_dark_period():
    dark = {
        "name": "w1",
        "reach": "ok",
        "capacity": {"source": "revoked", "reset_at": None, "evidence": "token revoked"},
    }
    blind = {"name": "w1", "reach": "unreachable"}
    well = {"name": "w1", "reach": "ok", "capacity": None}
    (d,) = darks_of([_sweep(0, dark), _sweep(300, blind), _sweep(600, well)], [], at(900))
    assert (d.source, d.reset, d.start, d.end, d.ongoing) == (
        "revoked",
        "unknown",
        at(0),
        at(600),
        False,
    )
    (d,) = darks_of([_sweep(0, dark), _sweep(300, blind)], [], at(900))
    assert d.ongoing and d.end == at(900)


def test_build_lanes_per_inventory_worker_and_one_per_master_of_a_shared_box():
    issues = [
        issue(1, timeline=[start("a", "w4", "alpha", s=0)]),
        issue(2, timeline=[start("b", "w4", "beta", s=1)]),
        issue(3, timeline=[start("c", "stray", s=2)]),
    ]
    tl = build(
        issues,
        [],
        now=at(100),
        since=at(-100),
        workers=[WorkerRef("w1"), WorkerRef("w4")],
        identity=FLEET,
    )
    assert [(lane.worker, lane.master, lane.in_inventory) for lane in tl.lanes] == [
        ("w1", "", True),
        ("w4", "alpha", True),
        ("w4", "beta", True),
        ("stray", "alpha", False),
    ]


def test_build_filters_by_issue_and_window_and_links_where_the_board_has_pages():
    issues = [
        issue(1, timeline=[start("a", s=0), term(Kind.SUCCESS, s=5, run="a")]),
        issue(2, timeline=[start("b", s=-90000), term(Kind.FAILED, s=-89000, run="b")]),
    ]
    tl = build(issues, [], now=at(10), since=at(-86400), link="https://github.com/o/r/issues/{n}")
    assert [r.run_id for r in tl.runs] == ["a"]
    assert tl.links[1] == "https://github.com/o/r/issues/1"
    only = build(issues, [], now=at(10), since=at(-200000), issue=2)
    assert [r.run_id for r in only.runs] == ["b"]
    assert build(issues, [], now=at(10), since=at(-86400)).links == {}


def test_the_window_fits_what_happened_inside_the_asked_span():
    tl = build([issue(1, timeline=[start("a", s=0)])], [], now=at(100), since=at(-86400))
    assert at(-86400) < tl.since < at(0)


def test_markers_from_anyone_but_the_fleet_draw_nothing():
    fake = Comment(999, "mallory", render(Kind.START, {"run": "x", "worker": "w1"}), at(0))
    assert runs_of(issue(1, timeline=[fake]), FLEET) == []


# -- properties --------------------------------------------------------------------------------

TERMINALS = [
    k
    for k in Kind
    if k
    in {
        Kind.SUCCESS,
        Kind.FAILED,
        Kind.NO_OP,
        Kind.PR_OPEN,
        Kind.BLOCKED,
        Kind.TIMED_OUT,
        Kind.STOPPED,
        Kind.GARBLED,
        Kind.CAPACITY,
        Kind.PARKED,
        Kind.CROSS_REPO,
    }
]
WORKERS = ["w1", "w2", "w3"]


@st.composite
def histories(draw):
    """Runs on one issue, each started on some worker and mostly ended with a named terminal
    carrying its run id; some never end; each worker's clock may be skewed."""
    n = draw(st.integers(1, 6))
    skew = {w: draw(st.integers(-900, 900)) for w in WORKERS}
    runs = []
    t = 0
    for i in range(n):
        t += draw(st.integers(1, 400))
        length = draw(st.integers(0, 300))
        w = draw(st.sampled_from(WORKERS))
        kind = draw(st.one_of(st.none(), st.sampled_from(TERMINALS)))
        runs.append((f"run{i}", w, t, length, kind))
    return runs, skew


def _issue_of(runs, skew) -> Issue:
    comments = []
    for run, w, t, length, kind in runs:
        comments.append(start(run, w, s=t + skew[w]))
        if kind is not None:
            comments.append(term(kind, s=t + length + skew[w], run=run))
    return issue(1, timeline=comments)


@settings(max_examples=150, deadline=None)
@given(histories())
def test_every_start_is_one_run_and_clock_skew_moves_no_outcome_or_length(h):
    runs, skew = h
    straight = {r.run_id: r for r in runs_of(_issue_of(runs, dict.fromkeys(WORKERS, 0)), FLEET)}
    skewed = {r.run_id: r for r in runs_of(_issue_of(runs, skew), FLEET)}
    assert set(straight) == set(skewed) == {r[0] for r in runs}
    for run, w, _t, length, kind in runs:
        for got in (straight[run], skewed[run]):
            assert got.worker == w
            assert got.outcome == (kind.value if kind else RUNNING)
            assert (got.end is None) == (kind is None)
            if got.end is not None:
                assert got.end >= got.start
                assert (got.end - got.start).total_seconds() == length


@settings(max_examples=100, deadline=None)
@given(histories(), st.randoms(use_true_random=False))
def test_the_order_the_board_returns_comments_in_changes_nothing(h, rnd):
    runs, skew = h
    iss = _issue_of(runs, skew)
    shuffled = list(iss.comments)
    rnd.shuffle(shuffled)
    again = Issue(iss.number, iss.title, comments=tuple(shuffled))
    assert runs_of(again, FLEET) == runs_of(iss, FLEET)


@settings(max_examples=100, deadline=None)
@given(histories())
def test_build_draws_every_run_in_the_window_once_and_never_outside_its_lane(h):
    runs, skew = h
    now = at(10_000)
    tl = build(
        [_issue_of(runs, skew)],
        [],
        now=now,
        since=at(-10_000),
        workers=[WorkerRef(w) for w in WORKERS],
        identity=FLEET,
    )
    assert sorted(r.run_id for r in tl.runs) == sorted(r[0] for r in runs)
    for lane in tl.lanes:
        assert all(r.worker == lane.worker for r in lane.runs)
    assert tl.since <= min(r.start for r in tl.runs)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.booleans()), max_size=30))
def test_dark_periods_never_overlap_on_one_worker_and_end_after_they_start(obs):
    trace = []
    for i, (reach, dark, _) in enumerate(obs):
        w = {"name": "w1", "reach": "ok" if reach else "unreachable"}
        if dark:
            w["capacity"] = {"source": "rate_limit", "reset_at": None, "evidence": "e"}
        trace.append(_sweep(i * 60, w))
    darks = darks_of(trace, [], at(len(obs) * 60 + 60))
    for d in darks:
        assert d.end >= d.start
    for a, b in itertools.pairwise(darks):
        assert a.end <= b.start
