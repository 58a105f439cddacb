"""The close rule (seed 001 §13): idle only when no unit is live and nothing is parked or in flight —
and never while a worker or the board could not be checked (D20). Tables for the named shapes,
hypothesis for the rule itself against an oracle that reads the built timeline directly."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.control.drain import wait_idle
from fleet.core.idle import IdleVerdict, InFlight, LiveUnit, idle
from fleet.core.markers import TERMINAL, Kind
from fleet.core.model import Comment, Event, Reach
from tests.builders import NOW, issue, marker, release, reopen, snapshot, unit, worker

DUE = {"due": "2025-01-01T00:10:00+00:00"}


# -- the named shapes ----------------------------------------------------------------------------
def test_an_empty_fleet_is_idle() -> None:
    v = idle(snapshot())
    assert v.idle and v == IdleVerdict()
    assert v.line().startswith("idle:")


def test_a_live_unit_is_not_idle_and_is_named() -> None:
    v = idle(
        snapshot(
            issue(7, timeline=[marker(Kind.START)]),
            workers=[worker("w1", units=[unit(7)])],
        )
    )
    assert not v.idle
    assert v.live == (LiveUnit(7, "w1", "agent", "active"),)
    assert [f.issue for f in v.in_flight] == [7] and v.in_flight[0].live
    assert "task-7 on w1/agent" in v.line()


def test_a_live_unit_for_an_issue_not_on_the_page_still_counts() -> None:
    v = idle(snapshot(workers=[worker("w1", units=[unit(99, "deactivating")])]))
    assert [u.issue for u in v.live] == [99]


@pytest.mark.parametrize("state", ["failed", "inactive"])
def test_a_finished_unit_still_holding_its_name_is_not_live(state: str) -> None:
    assert idle(snapshot(workers=[worker("w1", units=[unit(3, state)])])).idle


def test_a_start_with_no_unit_is_in_flight_an_orphan_not_idle() -> None:
    v = idle(snapshot(issue(4, timeline=[marker(Kind.START)])))
    assert v.in_flight and v.in_flight[0] == InFlight(4, v.in_flight[0].started_at, False)
    assert "no live unit seen" in v.line()


def test_a_reopen_after_a_start_does_not_end_the_run() -> None:
    assert not idle(snapshot(issue(4, timeline=[marker(Kind.START), reopen()]))).idle


@pytest.mark.parametrize(
    "terminal", [Kind.SUCCESS, Kind.FAILED, Kind.STOPPED, Kind.CANCELLED, Kind.REAPED]
)
def test_a_terminal_ends_the_flight(terminal: Kind) -> None:
    assert idle(snapshot(issue(4, timeline=[marker(Kind.START), marker(terminal)]))).idle


def test_a_human_hold_after_a_start_does_not_end_the_run() -> None:
    held = issue(4, timeline=[marker(Kind.START), marker(Kind.PARK, author="octocat")])
    assert [f.issue for f in idle(snapshot(held)).in_flight] == [4]


def test_a_parked_retry_is_not_idle_even_past_its_due_time() -> None:
    v = idle(snapshot(issue(5, timeline=[marker(Kind.START), marker(Kind.PARKED, DUE)])))
    assert not v.idle and [p.issue for p in v.parked] == [5]
    assert "#5 until 2025-01-01T00:10:00+00:00" in v.line()


def test_a_released_park_and_a_human_hold_are_not_parked() -> None:
    released = issue(5, timeline=[marker(Kind.PARKED, DUE), release()])
    held = issue(6, timeline=[marker(Kind.PARK, author="octocat")])
    assert idle(snapshot(released, held)).idle


def test_closed_issues_are_never_in_flight() -> None:
    assert idle(snapshot(issue(8, state="closed", timeline=[marker(Kind.START)]))).idle


def test_eligible_work_that_has_not_started_does_not_hold_the_drain() -> None:
    assert idle(snapshot(issue(1), issue(2))).idle


@pytest.mark.parametrize("reach", [Reach.UNREACHABLE, Reach.NO_PERMISSION, Reach.NO_RUNNER])
def test_an_unchecked_worker_is_never_idle(reach: Reach) -> None:
    v = idle(snapshot(workers=[worker("w1"), worker("w2", reach=reach)]))
    assert not v.idle and len(v.unchecked) == 1 and v.unchecked[0].startswith("worker w2")


def test_an_unreadable_board_is_never_idle() -> None:
    v = idle(snapshot(board_error="database is locked"))
    assert not v.idle and v.unchecked == ("board: database is locked",)


def test_the_json_says_what_the_line_says() -> None:
    v = idle(
        snapshot(
            issue(7, timeline=[marker(Kind.START)]),
            issue(5, timeline=[marker(Kind.PARKED, DUE)]),
            workers=[worker("w1", units=[unit(7)]), worker("w2", reach=Reach.UNREACHABLE)],
        )
    )
    j = v.to_json()
    assert j["idle"] is False
    assert [u["issue"] for u in j["live"]] == [7]  # type: ignore[index]
    assert [f["issue"] for f in j["in_flight"]] == [7]  # type: ignore[index]
    assert [p["issue"] for p in j["parked"]] == [5]  # type: ignore[index]
    assert len(j["unchecked"]) == 1  # type: ignore[arg-type]


# -- the rule, for any board and fleet --------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    what: str  # a marker kind's value, "release", "reopen", or "human-start" (a look-alike)


STEPS = st.sampled_from(
    [Step(k.value) for k in Kind] + [Step("release"), Step("reopen"), Step("human-start")]
)
UNIT_STATES = st.sampled_from(["active", "activating", "deactivating", "failed", "inactive"])
REACH = st.sampled_from([Reach.OK, Reach.OK, Reach.OK, Reach.UNREACHABLE, Reach.NO_RUNNER])


def _build(step: Step) -> Comment | Event:
    if step.what == "release":
        return release()
    if step.what == "reopen":
        return reopen()
    if step.what == "human-start":
        return marker(Kind.START, author="octocat")  # not the fleet's: text, not queue state
    kind = Kind(step.what)
    return marker(
        kind,
        DUE if kind is Kind.PARKED else None,
        author="octocat" if kind is Kind.PARK else "fleet",
    )


def _oracle(steps: list[Step]) -> tuple[bool, bool]:
    """(in flight, parked) read straight from the steps, in the order they happened."""
    run_words = {k.value for k in TERMINAL} | {Kind.START.value}
    fleet_markers = [s.what for s in steps if s.what in run_words]
    words = [s.what for s in steps if s.what != "human-start"]
    in_flight = bool(fleet_markers) and fleet_markers[-1] == Kind.START.value
    parked = bool(words) and words[-1] == Kind.PARKED.value
    return in_flight, parked


ISSUES = st.lists(st.tuples(st.booleans(), st.lists(STEPS, max_size=6)), max_size=5)
WORKERS = st.lists(
    st.tuples(REACH, st.lists(st.tuples(st.integers(1, 6), UNIT_STATES), max_size=3)),
    max_size=3,
)


@settings(max_examples=200, deadline=None)
@given(ISSUES, WORKERS, st.booleans())
def test_idle_iff_nothing_live_parked_in_flight_or_unchecked(
    specs: list[tuple[bool, list[Step]]],
    fleet: list[tuple[Reach, list[tuple[int, str]]]],
    board_down: bool,
) -> None:
    issues = [
        issue(n, state="open" if is_open else "closed", timeline=[_build(s) for s in steps])
        for n, (is_open, steps) in enumerate(specs, start=1)
    ]
    workers = [
        worker(f"w{i}", reach=reach, units=[unit(n, state) for n, state in units])
        for i, (reach, units) in enumerate(fleet)
    ]
    v = idle(
        snapshot(*issues, workers=workers, board_error="down" if board_down else None, now=NOW)
    )
    live = sorted(
        (n, f"w{i}")
        for i, (_, units) in enumerate(fleet)
        for n, s in units
        if s in ("active", "activating", "deactivating")
    )
    flights = [n for n, (o, st_) in enumerate(specs, 1) if o and _oracle(st_)[0]]
    parks = [n for n, (o, st_) in enumerate(specs, 1) if o and _oracle(st_)[1]]
    blind = [f"w{i}" for i, (reach, _) in enumerate(fleet) if reach is not Reach.OK]
    assert sorted((u.issue, u.worker) for u in v.live) == live
    assert [f.issue for f in v.in_flight] == flights
    assert [p.issue for p in v.parked] == parks
    assert len(v.unchecked) == len(blind) + board_down
    assert v.idle == (not live and not flights and not parks and not blind and not board_down)
    assert v.line().startswith("idle:" if v.idle else "not idle:")


# -- drain --wait: bounded in count and in time ------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


BUSY = IdleVerdict(unchecked=("board: down",))


def test_wait_returns_at_once_when_idle() -> None:
    c = Clock()
    r = wait_idle(lambda: IdleVerdict(), 30, poll_s=5, sleep=c.sleep, monotonic=c.monotonic)
    assert r.verdict.idle and r.polls == 1 and c.sleeps == []


def test_wait_polls_until_idle() -> None:
    c = Clock()
    answers = iter([BUSY, BUSY, IdleVerdict()])
    r = wait_idle(lambda: next(answers), 30, poll_s=5, sleep=c.sleep, monotonic=c.monotonic)
    assert r.verdict.idle and r.polls == 3 and c.sleeps == [5, 5]


def test_wait_gives_up_at_the_deadline() -> None:
    c = Clock()
    r = wait_idle(lambda: BUSY, 12, poll_s=5, sleep=c.sleep, monotonic=c.monotonic)
    assert not r.verdict.idle and c.t == 12 and c.sleeps == [5, 5, 2] and r.polls == 4


def test_wait_is_bounded_in_count_even_if_the_clock_stalls() -> None:
    r = wait_idle(lambda: BUSY, 10, poll_s=5, sleep=lambda s: None, monotonic=lambda: 0.0)
    assert r.polls == 3 and not r.verdict.idle


def test_wait_zero_observes_once() -> None:
    c = Clock()
    r = wait_idle(lambda: BUSY, 0, poll_s=5, sleep=c.sleep, monotonic=c.monotonic)
    assert r.polls == 1 and c.sleeps == []
