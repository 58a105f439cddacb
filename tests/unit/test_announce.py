"""The announcer's decision (D14), pure: the announce list and the never-announce list, as tables
and as properties, and report text that never carries a live closing keyword.

Every case is a snapshot from the state builders, judged at ``NOW``; ages are spelled as offsets
from ``NOW`` so each case says how old its stall is. The never-announce list gets the same care as
the announce list (D14: an announcer that reports correct holds trains the human to ignore it):
each entry has a table case over every stall shape, and a property over random boards.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.announce import (
    NO_RESET_BOUND_S,
    PARKED_OVERDUE_PERIODS,
    Assessment,
    Stall,
    StallKind,
    assess,
    report_for,
    stalls,
    title_for,
)
from fleet.core.closing import has_live_keyword
from fleet.core.markers import Kind
from fleet.core.model import (
    Capacity,
    CapacitySource,
    Comment,
    Event,
    Issue,
    Policy,
    Reach,
    Snapshot,
    WaitState,
    WorkerView,
    iso,
)
from fleet.core.select import select
from fleet.inventory import loads
from tests.builders import (
    CLOSING_TEXT,
    HUMAN,
    NOW,
    comment,
    halt,
    issue,
    marker,
    snapshot,
    unit,
    worker,
)

FAST = settings(max_examples=150, deadline=None)
POLICY = Policy()
PERIOD = POLICY.timer_period_s
THRESHOLD = POLICY.reaper_threshold_s
RL, REVOKED = CapacitySource.RATE_LIMIT, CapacitySource.REVOKED


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def beat(age_s: float = 60, outcome: str = "idle") -> dict[str, Any]:
    """A heartbeat as fleet.views.status.read_heartbeat returns it, written ``age_s`` before NOW."""
    return {"at": iso(ago(age_s)), "outcome": outcome}


FRESH = beat(60)


def start(on: str = "w2", *, age_s: float = THRESHOLD + 600) -> Comment:
    return marker(Kind.START, {"run": "r1", "worker": on, "master": "agent"}, at=ago(age_s))


def parked(due_age_s: float) -> list[Comment]:
    """A run that parked a retry due ``due_age_s`` before NOW (negative: due in the future)."""
    at = min(ago(due_age_s), NOW) - timedelta(hours=1)
    return [
        marker(Kind.START, {"run": "r1", "worker": "w1"}, at=at),
        marker(Kind.PARKED, {"due": iso(ago(due_age_s))}, at=at + timedelta(seconds=1)),
    ]


def tombstone_timeline() -> list[Comment]:
    return [start("w1", age_s=7200), marker(Kind.SUCCESS, {"pr": "#9"}, at=ago(7000))]


def unreachable(name: str = "w2") -> WorkerView:
    return worker(name, reach=Reach.UNREACHABLE)


def dark(
    name: str,
    source: CapacitySource,
    *,
    reset: datetime | None = None,
    written: datetime | None = None,
    issue_n: int | None = None,
) -> WorkerView:
    return replace(
        worker(name), capacity=Capacity(source, reset, "limit in a test", written, issue_n)
    )


def judge(
    *issues: Issue,
    workers: list[WorkerView] | None = None,
    heartbeat: dict[str, Any] | None = FRESH,
    **kw: Any,
) -> Assessment:
    snap = snapshot(*issues, workers=workers if workers is not None else [worker("w1")], **kw)
    return assess(snap, heartbeat, snap.now, snap.policy)


def kinds(a: Assessment, n: int | None = 1) -> list[StallKind]:
    return [s.kind for s in a.stalls if s.issue == n]


def quiet_state(a: Assessment, subject: str) -> str | None:
    return next((q.state for q in a.quiet if q.subject == subject), None)


# -- the announce list --------------------------------------------------------------------------


def test_a_start_past_the_threshold_on_an_unreachable_worker_is_announced() -> None:
    a = judge(issue(1, timeline=[start("w2")]), workers=[worker("w1"), unreachable("w2")])
    (s,) = a.stalls
    assert (s.kind, s.issue, s.worker) == (StallKind.START_UNCHECKED, 1, "w2")
    assert s.since == ago(THRESHOLD + 600) and s.age_s == THRESHOLD + 600
    assert report_for(s).title == "fleet: stalled #1 (start on unreachable w2)"


def test_a_start_the_reaper_cannot_check_for_another_workers_silence_is_announced() -> None:
    # The start names an unknown worker while w2 did not answer: it could be on w2, so the reaper
    # will not reap it (fleet.core.reap), and nobody is coming.
    a = judge(issue(1, timeline=[start("gone")]), workers=[worker("w1"), unreachable("w2")])
    (s,) = a.stalls
    assert (s.kind, s.worker) == (StallKind.START_UNCHECKED, None)
    assert report_for(s).title == "fleet: stalled #1 (start the reaper cannot check)"


def test_a_start_the_reaper_can_reap_is_left_to_the_reaper() -> None:
    a = judge(issue(1, timeline=[start("w1")]), workers=[worker("w1"), worker("w2")])
    assert a.stalls == ()
    assert quiet_state(a, "#1") == "reap"
    # its own worker answered without the unit: reapable whatever silent w2 does
    a = judge(issue(1, timeline=[start("w1")]), workers=[worker("w1"), unreachable("w2")])
    assert a.stalls == ()
    assert quiet_state(a, "#1") == "reap"


def test_a_young_start_on_an_unreachable_worker_is_a_run_in_flight() -> None:
    young = issue(1, timeline=[start("w2", age_s=THRESHOLD - 60)])
    a = judge(young, workers=[worker("w1"), unreachable("w2")])
    assert a.stalls == ()
    assert quiet_state(a, "#1") == "too-young"


def test_a_tombstone_is_announced_whatever_its_status() -> None:
    for status in ("Todo", "Done", None):
        a = judge(issue(1, timeline=tombstone_timeline(), status=status))
        (s,) = a.stalls
        assert s.kind is StallKind.TOMBSTONE and s.since == ago(7000)
        assert report_for(s).title == "fleet: tombstone #1 (success marker on an open issue)"


def test_a_closed_issue_is_never_a_tombstone() -> None:
    assert judge(issue(1, timeline=tombstone_timeline(), state="closed")).stalls == ()


def test_a_parked_item_long_past_due_is_announced() -> None:
    late = PARKED_OVERDUE_PERIODS * PERIOD + 60
    (s,) = judge(issue(1, timeline=parked(late))).stalls
    assert (s.kind, s.since, s.age_s) == (StallKind.PARKED_OVERDUE, ago(late), late)
    assert report_for(s).title == "fleet: stalled #1 (parked long past its due time)"


@pytest.mark.parametrize(
    ("late", "kw", "state"),
    [
        (PARKED_OVERDUE_PERIODS * PERIOD, {}, "parked"),  # due, a sweep is on its way
        (PERIOD, {}, "parked"),
        (86400, {"status": "In progress"}, "not-queued"),  # predicate 1 holds it: working
        (86400, {"lane": "nowhere"}, "lane-unknown"),
    ],
    ids=["at-the-bound", "one-period", "not-queued", "lane-unknown"],
)
def test_a_parked_item_something_explains_is_quiet(late: int, kw: dict, state: str) -> None:
    a = judge(issue(1, timeline=parked(late), **kw))
    assert kinds(a) == []
    assert quiet_state(a, "#1") == state


def test_an_overdue_parked_item_behind_a_dead_sweeper_is_reported_once_there() -> None:
    a = judge(issue(1, timeline=parked(86400)), heartbeat=beat(3 * PERIOD))
    assert [s.kind for s in a.stalls] == [StallKind.HEARTBEAT_STALE]
    assert quiet_state(a, "#1") == "parked"


def test_a_dark_worker_past_its_stated_reset_is_announced() -> None:
    w = dark("w2", RL, reset=ago(PERIOD + 60))
    (s,) = judge(workers=[worker("w1"), w]).stalls
    assert (s.kind, s.worker, s.since) == (StallKind.DARK_PAST_RESET, "w2", ago(PERIOD + 60))
    assert report_for(s).title == "fleet: worker w2 dark past its stated reset"


@pytest.mark.parametrize("reset_age", [-3600, 0, PERIOD], ids=["future", "just-now", "in-grace"])
def test_a_dark_worker_before_or_just_after_its_reset_is_quiet(reset_age: int) -> None:
    a = judge(workers=[worker("w1"), dark("w2", RL, reset=ago(reset_age))])
    assert a.stalls == () and quiet_state(a, "worker w2") == "dark"


def _capacity_death(on: str, age_s: float) -> list[Comment]:
    at = ago(age_s)
    return [
        marker(Kind.START, {"run": "r1", "worker": on}, at=at - timedelta(seconds=5)),
        marker(Kind.CAPACITY, {"source": "rate_limit", "reset": "unknown"}, at=at),
    ]


def test_darkness_with_no_stated_reset_is_dated_by_the_board_and_announced_past_the_bound() -> None:
    old = issue(1, timeline=_capacity_death("w2", NO_RESET_BOUND_S + 60))
    # The capacity file's own stamp says "just now": the board's marker wins (no state file).
    w = dark("w2", RL, written=ago(10), issue_n=1)
    (s,) = judge(old, workers=[worker("w1"), w]).stalls
    assert (s.kind, s.since) == (StallKind.DARK_NO_RESET, ago(NO_RESET_BOUND_S + 60))
    assert "capacity marker on #1" in s.detail
    assert report_for(s).title == "fleet: worker w2 dark with no stated reset"
    young = issue(1, timeline=_capacity_death("w2", NO_RESET_BOUND_S - 60))
    assert judge(young, workers=[worker("w1"), w]).stalls == ()


def test_a_capacity_marker_from_another_worker_does_not_date_this_one() -> None:
    other = issue(1, timeline=_capacity_death("w3", NO_RESET_BOUND_S + 60))
    w = dark("w2", RL, written=ago(60))
    a = judge(other, workers=[worker("w1"), w])
    assert a.stalls == ()  # dated by the file instead: one minute
    assert "capacity file" in next(q.why for q in a.quiet if q.subject == "worker w2")


def test_a_revoked_entitlement_is_announced_after_two_sweeps() -> None:
    w = dark("w2", REVOKED, written=ago(2 * PERIOD + 60))
    (s,) = judge(workers=[worker("w1"), w]).stalls
    assert s.kind is StallKind.DARK_REVOKED
    assert report_for(s).title == "fleet: worker w2 dark, entitlement revoked"
    fresh = dark("w2", REVOKED, written=ago(PERIOD))
    assert judge(workers=[worker("w1"), fresh]).stalls == ()


def test_an_undatable_darkness_with_no_reset_is_announced() -> None:
    (s,) = judge(workers=[worker("w1"), dark("w2", RL)]).stalls
    assert s.kind is StallKind.DARK_NO_RESET and s.since is None


@pytest.mark.parametrize(
    ("hb", "kind"),
    [
        (beat(2 * PERIOD + 1), StallKind.HEARTBEAT_STALE),
        (beat(86400, "halted"), StallKind.HEARTBEAT_STALE),
        (None, StallKind.HEARTBEAT_MISSING),
        ({"at": "yesterday"}, StallKind.HEARTBEAT_MISSING),
        ({"outcome": "idle"}, StallKind.HEARTBEAT_MISSING),
    ],
    ids=["stale", "stale-while-halted-last", "missing", "garbled", "no-at"],
)
def test_a_heartbeat_that_stopped_is_announced(hb: dict | None, kind: StallKind) -> None:
    (s,) = judge(heartbeat=hb).stalls
    assert s.kind is kind and s.subject == "sweeper"


@pytest.mark.parametrize("age", [0, 60, 2 * PERIOD, -3600], ids=["now", "1m", "at-bound", "future"])
def test_a_heartbeat_within_two_periods_is_quiet(age: int) -> None:
    a = judge(heartbeat=beat(age))
    assert a.stalls == () and quiet_state(a, "sweeper") == "beating"


def test_the_heartbeat_bound_follows_the_timer_period() -> None:
    policy = Policy(timer_period_s=60)
    assert [s.kind for s in judge(heartbeat=beat(121), policy=policy).stalls] == [
        StallKind.HEARTBEAT_STALE
    ]
    assert judge(heartbeat=beat(119), policy=policy).stalls == ()


# -- the never-announce list --------------------------------------------------------------------

# Each stall shape an item can take, built on a fleet where it would be announced.
SHAPES: dict[str, tuple[list[Comment], list[WorkerView]]] = {
    "tombstone": (tombstone_timeline(), [worker("w1")]),
    "start-unchecked": ([start("w2")], [worker("w1"), unreachable("w2")]),
    "parked-overdue": (parked(86400), [worker("w1")]),
}

# Each entry of the never-announce list, as the keywords that put an item there (and the word the
# dry run gives it). A running item is built separately: its unit must live on a worker.
NEVER: dict[str, tuple[dict[str, Any], str]] = {
    "blocked": ({"blocked_by": [7]}, "blocked"),
    "hold-label": ({"labels": ["hold"]}, "held"),
    "assignee": ({"assignees": [HUMAN]}, "held"),
    "do-not-dispatch": ({"title": "[do-not-dispatch] spike"}, "held"),
    "fixture": ({"labels": ["fleet-fixture"]}, "fixture"),
    "report": ({"labels": ["fleet-report"]}, "report"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("never", sorted(NEVER))
def test_the_never_list_quiets_every_item_stall(shape: str, never: str) -> None:
    timeline, workers = SHAPES[shape]
    assert kinds(judge(issue(1, timeline=timeline), workers=workers)) != [], "shape must announce"
    kw, state = NEVER[never]
    a = judge(issue(1, timeline=timeline, **kw), workers=workers)
    assert kinds(a) == []
    assert quiet_state(a, "#1") == state


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_park_latch_quiets_every_item_stall(shape: str) -> None:
    timeline, workers = SHAPES[shape]
    latch = marker(Kind.PARK, {}, "holding this", author=HUMAN, at=NOW - timedelta(days=400))
    a = judge(issue(1, timeline=[latch, *timeline]), workers=workers)
    assert kinds(a) == [] and quiet_state(a, "#1") == "held"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_running_item_is_never_announced(shape: str) -> None:
    timeline, workers = SHAPES[shape]
    running = [replace(w, units=(replace(unit(1), worker=w.name),)) if w.name == "w1" else w
               for w in workers]  # fmt: skip
    a = judge(issue(1, timeline=timeline), workers=running)
    assert kinds(a) == [] and quiet_state(a, "#1") == "running"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_halted_fleet_announces_nothing_and_says_what_it_held_back(shape: str) -> None:
    timeline, workers = SHAPES[shape]
    dead = [*workers, dark("w9", RL, reset=ago(86400))]
    a = judge(issue(1, timeline=timeline), workers=dead, halts=[halt("migration")])
    assert a.stalls == () and a.halted
    held = [q for q in a.quiet if q.state == "halted"]
    assert {q.subject for q in held} == {"#1", "worker w9"}
    assert all("migration" in q.why for q in held)
    # A stopped sweeper too: the operator who pulled the switch may have stopped its timer.
    a = judge(workers=dead, heartbeat=None, halts=[halt("migration")])
    assert a.stalls == () and quiet_state(a, "sweeper") == "halted"


def test_a_halt_issue_halts_the_announcer_too() -> None:
    switch = issue(2, "HALT FLEET", body="bad deploy")
    a = judge(issue(1, timeline=tombstone_timeline()), switch)
    assert a.stalls == () and a.halted
    assert quiet_state(a, "#2") == "kill-switch"


def test_parked_before_its_due_time_is_quiet() -> None:
    a = judge(issue(1, timeline=parked(-3600)))
    assert kinds(a) == [] and quiet_state(a, "#1") == "parked"


def test_an_unreadable_board_judges_nothing() -> None:
    snap = snapshot(issue(1, timeline=tombstone_timeline()), board_error="timeout")
    a = assess(snap, None, NOW, POLICY)
    assert a.stalls == () and a.board_error == "timeout"


def test_a_merely_waiting_item_is_named_and_quiet() -> None:
    a = judge(issue(1, timeline=[marker(Kind.FAILED, at=ago(60))] * 1), issue(2, status="Done"))
    assert a.stalls == ()
    assert quiet_state(a, "#2") == "not-queued"
    assert quiet_state(a, "#1") is None  # eligible: it is moving, nothing to say


# -- properties over random boards ----------------------------------------------------------------

AGES = st.integers(-3 * 86400, 30 * 86400)
KINDS = st.sampled_from(
    [Kind.START, Kind.SUCCESS, Kind.FAILED, Kind.PARKED, Kind.CAPACITY, Kind.BLOCKED, Kind.PARK]
)
WORKER_STATES = st.sampled_from(["ok", "unreachable", "dark-reset", "dark-none", "revoked"])


@st.composite
def workers_(draw: st.DrawFn) -> list[WorkerView]:
    out = []
    for name in ("w1", "w2", "w3")[: draw(st.integers(1, 3))]:
        state = draw(WORKER_STATES)
        units = tuple(
            replace(unit(n), worker=name) for n in draw(st.sets(st.integers(1, 5), max_size=2))
        )
        if state == "unreachable":
            w = worker(name, reach=Reach.UNREACHABLE)
        elif state == "ok":
            w = replace(worker(name), units=units)
        else:
            src = REVOKED if state == "revoked" else RL
            reset = ago(draw(AGES)) if state == "dark-reset" else None
            w = dark(
                name, src, reset=reset, written=ago(draw(AGES)), issue_n=draw(st.integers(1, 5))
            )
            w = replace(w, units=units)
        out.append(w)
    return out


HOLDS = st.lists(
    st.sampled_from(["blocked", "hold", "fixture", "report", "assignee", "park", "dnd"]),
    max_size=2,
)


@st.composite
def items(draw: st.DrawFn, number: int) -> Issue:
    """An issue drawn near the stall shapes (so the never-list property is not vacuous), with
    none, one or two entries of the never-announce list on top."""
    shape = draw(st.sampled_from(["tombstone", "start", "parked", "random"]))
    timeline: list[Comment | Event] = []
    run_at = ago(draw(AGES))
    on = draw(st.sampled_from(["w1", "w2", "w3"]))
    if shape != "random":
        timeline.append(marker(Kind.START, {"worker": on}, at=run_at))
    if shape == "tombstone":
        timeline.append(marker(Kind.SUCCESS, {}, draw(CLOSING_TEXT), at=run_at + timedelta(1)))
    elif shape == "parked":
        due = {"due": iso(ago(draw(AGES)))}
        timeline.append(marker(Kind.PARKED, due, at=run_at + timedelta(seconds=1)))
    elif shape == "random":
        for age in sorted(draw(st.lists(AGES, max_size=4)), reverse=True):
            kind = draw(KINDS)
            fields = {"worker": on} if kind is not Kind.PARKED else {"due": iso(ago(draw(AGES)))}
            author = HUMAN if kind is Kind.PARK else "fleet"
            timeline.append(marker(kind, fields, draw(CLOSING_TEXT), author=author, at=ago(age)))
    if draw(st.booleans()):
        timeline.append(comment(draw(CLOSING_TEXT), at=ago(draw(AGES))))
    holds = set(draw(HOLDS))
    if "park" in holds:
        timeline.insert(0, marker(Kind.PARK, {}, author=HUMAN, at=NOW - timedelta(days=400)))
    labels = [lbl for h, lbl in [("hold", "hold"), ("fixture", "fleet-fixture"),
                                 ("report", "fleet-report")] if h in holds]  # fmt: skip
    title = draw(CLOSING_TEXT)
    return issue(
        number,
        f"[do-not-dispatch] {title}" if "dnd" in holds else title,
        timeline=sorted(timeline, key=lambda c: c.created_at if isinstance(c, Comment) else c.at),
        state=draw(st.sampled_from(["open", "open", "open", "closed"])),
        status=draw(st.sampled_from(["Todo", "Todo", "Done", None])),
        labels=labels,
        assignees=[HUMAN] if "assignee" in holds else [],
        blocked_by=[9] if "blocked" in holds else [],
    )


@st.composite
def boards(draw: st.DrawFn) -> tuple[Snapshot, dict[str, Any] | None]:
    issues = [draw(items(n)) for n in range(1, draw(st.integers(0, 5)) + 1)]
    snap = snapshot(*issues, workers=draw(workers_()))
    hb = draw(st.one_of(st.just(FRESH), st.none(), AGES.map(lambda a: beat(a))))
    return snap, hb


def _mechanism_holds(i: Issue, snap: Snapshot) -> bool:
    """The never-announce list, restated independently of fleet.core.announce."""
    from fleet.core.markers import history, parked_until

    h = history(i, snap.policy.identity)
    due = parked_until(h)
    return bool(
        i.open_blockers
        or set(i.labels) & {"hold", "fleet-fixture", "fleet-report"}
        or i.assignees
        or "[do-not-dispatch]" in i.title
        or h.park is not None
        or snap.live_units(i.number)
        or (due is not None and due > snap.now)
    )


@FAST
@given(boards())
def test_never_announce_holds_on_any_board(board: tuple[Snapshot, dict | None]) -> None:
    snap, hb = board
    found = stalls(snap, hb, snap.now, snap.policy)
    by_number = {i.number: i for i in snap.issues}
    for s in found:
        if s.issue is not None:
            i = by_number[s.issue]
            assert i.is_open, "a closed issue is never a stall"
            assert not _mechanism_holds(i, snap), f"announced #{s.issue}, which the mechanism holds"
    # Halted: nothing at all, whatever the board holds.
    assert stalls(replace(snap, halts=(halt(),)), hb, snap.now, snap.policy) == ()
    # One stall per subject and kind, so one title per stall: idempotence by title can work.
    titles = [report_for(s).title for s in found]
    assert len(titles) == len(set(titles))
    # Deterministic: the same board gives the same stalls.
    assert stalls(snap, hb, snap.now, snap.policy) == found
    for s in found:
        r = report_for(s)
        assert not has_live_keyword(r.title) and not has_live_keyword(r.body)


@FAST
@given(
    st.sampled_from(sorted(SHAPES)),
    st.lists(st.sampled_from([*sorted(NEVER), "park", "running"]), min_size=1, max_size=3),
    CLOSING_TEXT,
    st.integers(THRESHOLD + 1, 400 * 86400),
)
def test_any_never_entry_quiets_any_stall_shape(
    shape: str, never: list[str], title: str, age: int
) -> None:
    """Every stall shape, aged anywhere past its bound, under any combination of never-list
    entries: the item is never announced (the table above, searched)."""
    timeline, workers = SHAPES[shape]
    timeline = [replace(c, created_at=c.created_at - timedelta(seconds=age)) for c in timeline]
    kw: dict[str, Any] = {"title": title}
    for entry in never:
        for key, value in NEVER.get(entry, ({}, ""))[0].items():
            kw[key] = [*kw.get(key, []), *value] if isinstance(value, list) else value
    if "park" in never:
        timeline.insert(0, marker(Kind.PARK, {}, author=HUMAN, at=NOW - timedelta(days=800)))
    if "running" in never:
        workers = [replace(w, units=(replace(unit(1), worker=w.name),)) for w in workers]
    a = judge(issue(1, timeline=timeline, **kw), workers=workers)
    assert kinds(a) == []


@FAST
@given(
    st.sampled_from(list(StallKind)),
    CLOSING_TEXT,
    CLOSING_TEXT,
    st.one_of(st.none(), CLOSING_TEXT),
    st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_report_text_never_carries_a_live_closing_keyword(
    kind: StallKind, detail: str, title: str, worker_name: str | None, number: int | None
) -> None:
    """Attacker-controlled issue text quoted into a report — a title, evidence, a worker name —
    never makes the report able to close anything when a PR quotes it (D14)."""
    s = Stall(kind, detail, issue=number, worker=worker_name, since=NOW, quoted_title=title)
    r = report_for(s)
    assert not has_live_keyword(r.title)
    assert not has_live_keyword(r.body)
    assert "\n" not in r.title


@FAST
@given(st.sampled_from(list(StallKind)), CLOSING_TEXT, AGES, st.integers(1, 999))
def test_a_title_never_depends_on_age_or_detail(
    kind: StallKind, detail: str, age: int, number: int
) -> None:
    one = Stall(kind, "first sighting", issue=number, worker="w2", since=ago(0), age_s=0)
    two = replace(one, detail=detail, since=ago(age), age_s=age, quoted_title=detail)
    assert title_for(one) == title_for(two) == report_for(two).title


def test_the_release_token_never_starts_a_report_line() -> None:
    """A report quoted back as a comment must not release anything (seed 003, MVV 9)."""
    for kind in StallKind:
        body = report_for(Stall(kind, "fleet:release", issue=1, quoted_title="fleet:release")).body
        assert not any(line.startswith("fleet:release") for line in body.splitlines())


# -- the report label: policy, inventory, and select's hold ---------------------------------------


def test_a_report_labelled_issue_is_held_by_select_even_when_queued() -> None:
    plan = select(snapshot(issue(1, labels=["fleet-report"], status="Todo")))
    assert plan.dispatch == ()
    w = plan.reason_for(1)
    assert w is not None and (w.predicate, w.state) == (9, WaitState.HELD)
    assert "fleet-report" in w.reason


def test_the_report_label_is_policy_and_follows_the_inventory(tmp_path: Path) -> None:
    assert Policy().report_label == "fleet-report"
    inv = loads("workers: [{name: w1}]\n", str(tmp_path / "inv.yaml"))
    assert inv.policy.report_label == "fleet-report"
    inv = loads(
        "policy: {report_label: stall-report}\nworkers: [{name: w1}]\n", str(tmp_path / "i.yaml")
    )
    assert inv.policy.report_label == "stall-report"
    plan = select(snapshot(issue(1, labels=["stall-report"]), policy=inv.policy))
    assert plan.dispatch == () and plan.reason_for(1) is not None
    a = judge(issue(1, timeline=tombstone_timeline(), labels=["stall-report"]), policy=inv.policy)
    assert a.stalls == () and quiet_state(a, "#1") == "report"
