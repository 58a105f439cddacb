"""reap_decisions(snapshot): the reaper's three conditions (D14), each holding and releasing, and
the safety properties that matter most: it never reaps while any worker could not be checked,
never with a live unit, never inside the threshold (D20: could-not-check is never "no unit")."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.cmd.hygiene import reap_lines
from fleet.core.markers import Kind, history, open_start, parse
from fleet.core.model import Comment, Issue, Policy, Reach, Snapshot, WaitState, WorkerView
from fleet.core.reap import ReapState, reap_decisions, reaped_marker, threshold_warning
from fleet.core.select import select
from fleet.inventory import DEFAULT_MAX_RUN_S
from fleet.roles.reaper import ReapReport, replay_reap
from fleet.trace import to_jsonable
from tests.builders import (
    FLEET,
    T0,
    issue,
    marker,
    release,
    reopen,
    snapshot,
    unit,
    worker,
)

FAST = settings(max_examples=150, deadline=None)
THRESHOLD = Policy().reaper_threshold_s


def started(number: int = 1, *, on: str | None = "w1", before: list | None = None) -> Issue:
    fields = {"run": "r1", "worker": on, "master": "agent", "unit": f"task-{number}"}
    return issue(number, timeline=[*(before or []), marker(Kind.START, fields)])


def _start_at(i: Issue) -> datetime:
    m = open_start(history(i, FLEET))
    assert m is not None
    return m.at


def old(i: Issue) -> datetime:
    return _start_at(i) + timedelta(seconds=THRESHOLD + 1)


def only(snap: Snapshot):
    (d,) = reap_decisions(snap)
    return d


# -- the table ----------------------------------------------------------------------------------


def test_an_orphaned_start_past_the_threshold_is_reaped() -> None:
    i = started()
    d = only(snapshot(i, workers=[worker("w1"), worker("w2")], now=old(i)))
    assert (d.reap, d.state) == (True, ReapState.REAP)
    assert "no live unit on any of 2 probed worker(s)" in d.why
    assert (d.run, d.worker) == ("r1", "w1")


def test_a_live_unit_anywhere_holds_it_however_old() -> None:
    i = started(on="w1")
    for state in ("active", "activating", "deactivating"):
        snap = snapshot(i, workers=[worker("w1"), worker("w2", units=[unit(1, state)])], now=old(i))
        d = only(snap)
        assert (d.reap, d.state) == (False, ReapState.LIVE), state
        assert "w2/agent" in d.why


def test_a_unit_that_ended_does_not_hold_it() -> None:
    i = started()
    d = only(snapshot(i, workers=[worker("w1", units=[unit(1, "failed")])], now=old(i)))
    assert d.reap


def test_inside_the_threshold_the_clock_protects_it() -> None:
    i = started()
    d = only(snapshot(i, workers=[worker("w1")], now=_start_at(i) + timedelta(seconds=60)))
    assert (d.reap, d.state) == (False, ReapState.TOO_YOUNG)
    assert "blinked" in d.why
    at_edge = _start_at(i) + timedelta(seconds=THRESHOLD)
    assert only(snapshot(i, workers=[worker("w1")], now=at_edge)).reap


@pytest.mark.parametrize("reach", [Reach.UNREACHABLE, Reach.NO_PERMISSION, Reach.NO_RUNNER])
def test_a_silent_worker_blocks_only_the_starts_that_could_be_on_it(reach: Reach) -> None:
    ghost = WorkerView("w2", "w2", reach, detail="ssh: connection refused")
    mine = started(on="w1")  # the start names a worker that answered without the unit
    d = only(snapshot(mine, workers=[worker("w1"), ghost], now=old(mine)))
    assert (d.reap, d.state) == (True, ReapState.REAP), d.why
    assert "w2 did not answer; the start names w1, which did" in d.why
    theirs = started(on="w2")  # the start names the silent worker: it may still run there
    d = only(snapshot(theirs, workers=[worker("w1"), ghost], now=old(theirs)))
    assert (d.reap, d.state) == (False, ReapState.COULD_NOT_CHECK)
    assert "w2" in d.why and "connection refused" in d.why
    for unnamed in (started(on=None), started(on="gone")):  # could be anywhere, the ghost too
        d = only(snapshot(unnamed, workers=[worker("w1"), ghost], now=old(unnamed)))
        assert (d.reap, d.state) == (False, ReapState.COULD_NOT_CHECK)


@pytest.mark.parametrize(("on", "says"), [(None, "names no worker"), ("gone", "does not probe")])
def test_a_start_naming_no_probed_worker_is_could_not_check(on: str | None, says: str) -> None:
    i = started(on=on)
    d = only(snapshot(i, workers=[worker("w1")], now=old(i)))
    assert (d.reap, d.state) == (False, ReapState.COULD_NOT_CHECK)
    assert says in d.why


@pytest.mark.parametrize(
    "after",
    [
        lambda: marker(Kind.FAILED, {"exit": 1}),
        lambda: marker(Kind.STOPPED, {"signal": "SIGTERM"}),
        lambda: marker(Kind.REAPED, {}),
        lambda: reopen(),
        lambda: release(),
    ],
    ids=["terminal", "stopped", "already-reaped", "reopen", "release"],
)
def test_only_a_start_that_is_the_last_word_is_considered(after) -> None:  # type: ignore[no-untyped-def]
    i = issue(1, timeline=[marker(Kind.START, {"worker": "w1"}), after()])
    assert reap_decisions(snapshot(i, now=old(started()))) == ()


def test_closed_issues_and_an_unreadable_board_decide_nothing() -> None:
    i = issue(1, state="closed", timeline=[marker(Kind.START, {"worker": "w1"})])
    assert reap_decisions(snapshot(i)) == ()
    j = started()
    assert reap_decisions(snapshot(j, now=old(j), board_error="HTTP 502")) == ()


def test_a_lookalike_start_by_someone_else_is_not_the_fleets() -> None:
    i = issue(1, timeline=[marker(Kind.START, {"worker": "w1"}, author="mallory")])
    assert reap_decisions(snapshot(i)) == ()


# -- the marker: eligible again, the attempt counted ------------------------------------------------


def _reap(i: Issue, now: datetime) -> Issue:
    """The issue as it reads after the reaper posts its marker for it."""
    (d,) = reap_decisions(snapshot(i, now=now))
    assert d.reap
    c = Comment(10_000 + i.number, FLEET, reaped_marker(d), now)
    return replace(i, comments=(*i.comments, c))


def test_the_reaped_marker_parses_and_names_the_start_it_resets() -> None:
    i = started()
    (d,) = reap_decisions(snapshot(i, now=old(i)))
    m = parse(Comment(1, FLEET, reaped_marker(d), old(i)))
    assert m is not None and m.kind is Kind.REAPED
    assert m.fields == {"run": "r1", "worker": "w1", "start": str(d.start_comment)}


def test_a_reaped_item_is_eligible_again_and_its_attempt_is_counted() -> None:
    i = started()
    after = _reap(i, old(i))
    h = history(after, FLEET)
    assert h.last_marker is not None and h.last_marker.kind is Kind.REAPED
    assert h.attempts == 1
    plan = select(snapshot(after, now=old(i)))
    assert [d.issue for d in plan.dispatch] == [1], plan.waiting


def test_an_item_that_keeps_losing_its_runner_reaches_the_attempt_cap() -> None:
    cap = Policy().attempt_cap
    timeline: list = []
    for _ in range(cap):
        timeline += [marker(Kind.START, {"worker": "w1"}), marker(Kind.REAPED, {})]
    i = issue(1, timeline=timeline)
    assert history(i, FLEET).attempts == cap
    (w,) = select(snapshot(i)).waiting
    assert w.state == WaitState.EXHAUSTED


def test_while_the_unit_lives_a_start_is_running_not_reapable() -> None:
    i = started()
    snap = snapshot(i, workers=[worker("w1", units=[unit(1)])], now=old(i))
    assert only(snap).state == ReapState.LIVE
    (w,) = select(snap).waiting
    assert w.state == WaitState.RUNNING


# -- the threshold and the measurement it came from ------------------------------------------------


def test_the_default_threshold_is_twice_the_longest_possible_run() -> None:
    # D13: 2x the longest run; no run outlives its unit's limit (RuntimeMaxSec = max_run_s).
    assert THRESHOLD == 2 * DEFAULT_MAX_RUN_S
    assert threshold_warning(THRESHOLD, DEFAULT_MAX_RUN_S, "w1") is None
    line = threshold_warning(DEFAULT_MAX_RUN_S, DEFAULT_MAX_RUN_S, "w1")
    assert line is not None and "w1" in line


# -- properties ---------------------------------------------------------------------------------

NAMES = ("w1", "w2", "w3")
KINDS = (Kind.START, Kind.SUCCESS, Kind.FAILED, Kind.REAPED, Kind.STOPPED, Kind.SUPERSEDED)


@st.composite
def fleets(draw: st.DrawFn) -> Snapshot:
    workers = []
    for name in NAMES[: draw(st.integers(1, 3))]:
        reach = draw(st.sampled_from(list(Reach)))
        units = draw(
            st.lists(
                st.builds(
                    unit,
                    st.integers(1, 4),
                    st.sampled_from(["active", "activating", "deactivating", "failed"]),
                ),
                max_size=3,
            )
        )
        view = worker(name, reach=reach, units=units if reach is Reach.OK else ())
        workers.append(view)
    issues = []
    for number in range(1, 5):
        timeline = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.sampled_from(KINDS))
            on = draw(st.sampled_from([*NAMES, "ghost", None]))
            at = T0 + timedelta(seconds=draw(st.integers(0, 3 * THRESHOLD)))
            timeline.append(marker(kind, {"worker": on}, at=at))
        state = draw(st.sampled_from(["open", "open", "closed"]))
        issues.append(issue(number, timeline=timeline, state=state))
    now = T0 + timedelta(seconds=draw(st.integers(0, 4 * THRESHOLD)))
    return snapshot(*issues, workers=workers, now=now)


@FAST
@given(fleets())
def test_never_reaps_a_start_whose_own_worker_did_not_answer(snap: Snapshot) -> None:
    answered = {w.name for w in snap.workers if w.reachable}
    for d in reap_decisions(snap):
        if d.reap:
            assert d.worker in answered


@FAST
@given(fleets())
def test_never_reaps_with_a_live_unit_or_inside_the_threshold(snap: Snapshot) -> None:
    for d in reap_decisions(snap):
        if d.reap:
            assert snap.live_units(d.issue) == ()
            assert (snap.now - d.start_at).total_seconds() >= snap.policy.reaper_threshold_s


@FAST
@given(fleets())
def test_every_decision_is_an_open_issue_whose_last_word_is_that_start(snap: Snapshot) -> None:
    for d in reap_decisions(snap):
        i = snap.issue(d.issue)
        assert i is not None and i.is_open
        start = open_start(history(i, FLEET))
        assert start is not None and start.comment_id == d.start_comment
        assert d.reap == (d.state == ReapState.REAP) and d.why


@FAST
@given(fleets(), st.data())
def test_silencing_any_worker_reaps_nothing_that_could_be_on_it(
    snap: Snapshot, data: st.DataObject
) -> None:
    """A silent worker blocks the reaps of the starts it may hold — its own, an unnamed one, one
    naming a worker the fleet does not probe — and only those: a start whose own worker answered
    without the unit is reapable whatever another worker does."""
    victim = data.draw(st.sampled_from(snap.workers))
    dark = tuple(
        WorkerView(w.name, w.lane, Reach.UNREACHABLE, detail="blinked") if w is victim else w
        for w in snap.workers
    )
    silenced = replace(snap, workers=dark)
    answered = {w.name for w in dark if w.reachable}
    for d in reap_decisions(silenced):
        if d.reap:
            assert d.worker in answered and d.worker != victim.name, d
    # the same starts are judged; only the verdict changes
    assert [d.issue for d in reap_decisions(silenced)] == [d.issue for d in reap_decisions(snap)]


# -- replay: a recorded REAP decides the same from its recorded snapshot -------------------------


def test_a_recorded_reap_replays_and_a_tampered_one_differs() -> None:
    i = started()
    snap = snapshot(i, workers=[worker("w1")], now=old(i))
    decisions = reap_decisions(snap)
    record = {"event": "REAP", "snapshot": to_jsonable(snap), "decisions": to_jsonable(decisions)}
    assert replay_reap(record).differences == ()
    tampered = [{**d, "state": ReapState.LIVE} for d in record["decisions"]]
    (diff,) = replay_reap({**record, "decisions": tampered}).differences
    assert (diff.issue, diff.aspect) == (1, "reap")
    assert diff.recorded.startswith(ReapState.LIVE) and diff.now.startswith(ReapState.REAP)


def test_the_dry_run_names_what_would_be_reaped_and_why_not_the_rest() -> None:
    orphan, running = started(1), started(2)
    now = old(running)
    fresh = issue(3, timeline=[marker(Kind.START, {"worker": "w1"}, at=now - timedelta(seconds=9))])
    snap = snapshot(orphan, running, fresh, workers=[worker("w1", units=[unit(2)])], now=now)
    report = ReapReport("dry-run", THRESHOLD, reap_decisions(snap))
    lines = reap_lines(report, apply=False)
    assert "2h00m" in lines[0] and "3 open start(s)" in lines[0]
    assert lines[1].startswith("  #1: would reap — ")
    assert lines[2].startswith("  #2: not reaped (live) — ")
    assert lines[3].startswith("  #3: not reaped (too-young) — ")
    ghost = WorkerView("w9", "w9", Reach.UNREACHABLE, detail="refused")
    on_ghost = started(1, on="w9")  # its own worker is the silent one
    blind = snapshot(on_ghost, workers=[worker("w1"), ghost], now=old(on_ghost))
    lines = reap_lines(ReapReport("dry-run", THRESHOLD, reap_decisions(blind)), apply=False)
    assert lines[1].startswith("  #1: not reaped (could-not-check) — ") and "w9" in lines[1]
