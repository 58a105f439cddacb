"""select(snapshot) -> Plan: seed 003's predicates 1–11 (and the kill switches, 0), as tables.

Every case is a snapshot built from state builders and the one outcome expected for issue #1:
either a dispatch onto a named worker, or the predicate number, the state word and a phrase of the
reason. Each predicate appears both holding and releasing, so a predicate that never fires — or
never lets go — fails a named case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.closing import has_live_keyword
from fleet.core.markers import Kind
from fleet.core.model import CapacitySource, Halt, Plan, Policy, Reach, Snapshot
from fleet.core.select import halt_line, issue_halts, select
from fleet.core.select import healthy as healthy_workers
from tests.builders import (
    CLOSING_TEXT,
    FLEET,
    HUMAN,
    NOW,
    T0,
    comment,
    halt,
    issue,
    marker,
    ref,
    release,
    reopen,
    snapshot,
    unit,
    worker,
)

FAST = settings(max_examples=200, deadline=None)
S, F, C, P = Kind.START, Kind.FAILED, Kind.CAPACITY, Kind.PARKED
RL = CapacitySource.RATE_LIMIT


@dataclass(frozen=True)
class Go:
    """Expected: issue #1 is dispatched onto ``worker``, and the why mentions ``why``."""

    worker: str
    why: str = ""


@dataclass(frozen=True)
class Hold:
    """Expected: issue #1 waits on ``predicate`` in state ``state``, the reason containing ``says``."""

    predicate: int
    state: str
    says: str = ""


Case = tuple[Callable[[], Snapshot], Go | Hold]


def check(plan: Plan, expected: Go | Hold, number: int = 1) -> None:
    went = [d for d in plan.dispatch if d.issue == number]
    wait = plan.reason_for(number)
    if isinstance(expected, Go):
        assert wait is None, f"expected a dispatch, got {wait}"
        assert len(went) == 1 and went[0].worker == expected.worker, went
        assert expected.why in went[0].why, went[0].why
    else:
        assert not went, f"expected a hold, got {went}"
        assert wait is not None
        assert (wait.predicate, wait.state) == (expected.predicate, expected.state), wait
        assert expected.says in wait.reason, wait.reason


def table(cases: dict[str, Case]):
    return pytest.mark.parametrize(("build", "expected"), cases.values(), ids=cases.keys())


def two_workers(**second) -> list:
    return [worker("w1", "a", **second), worker("w2", "b")]


# -- predicate 1: Status is Todo, the field --------------------------------------------------------

P1: dict[str, Case] = {
    "todo-dispatches": (lambda: snapshot(issue()), Go("w1")),
    "in-progress-holds": (
        lambda: snapshot(issue(status="In progress")),
        Hold(1, "not-queued", "'In progress'"),
    ),
    "done-holds": (lambda: snapshot(issue(status="Done")), Hold(1, "not-queued", "'Done'")),
    "unset-holds": (lambda: snapshot(issue(status=None)), Hold(1, "not-queued", "unset")),
    "a-todo-label-is-not-the-field": (
        lambda: snapshot(issue(status="Backlog", labels=["Todo"])),
        Hold(1, "not-queued"),
    ),
}

# -- predicate 2: the lane names a worker, or is blank ---------------------------------------------

P2: dict[str, Case] = {
    "blank-lane-is-routable": (lambda: snapshot(issue(lane=None)), Go("w1", "no lane")),
    "empty-lane-is-routable": (lambda: snapshot(issue(lane="")), Go("w1", "no lane")),
    "unknown-lane-holds": (
        lambda: snapshot(issue(lane="gpu")),
        Hold(2, "lane-unknown", "lane 'gpu' names no worker"),
    ),
    "lane-first-for-locality": (
        lambda: snapshot(issue(lane="b"), workers=two_workers()),
        Go("w2", "lane b"),
    ),
    "lane-naming-a-worker-by-name": (
        lambda: snapshot(issue(lane="w2"), workers=two_workers()),
        Go("w2", "lane w2;"),
    ),
    "lane-worker-dark-routes-elsewhere": (
        lambda: snapshot(issue(lane="a"), workers=two_workers(dark=RL)),
        Go("w2", "lane a has no healthy worker; any"),
    ),
    "lane-worker-unreachable-routes-elsewhere": (
        lambda: snapshot(issue(lane="a"), workers=two_workers(reach=Reach.UNREACHABLE)),
        Go("w2", "has no healthy worker"),
    ),
}

# -- predicate 3: the parent is open, or there is none ---------------------------------------------

P3: dict[str, Case] = {
    "no-parent": (lambda: snapshot(issue(parent=None)), Go("w1")),
    "open-parent": (lambda: snapshot(issue(parent=ref(9, "open"))), Go("w1")),
    "closed-parent-holds": (
        lambda: snapshot(issue(parent=ref(9, "closed"))),
        Hold(3, "parent-closed", "parent #9 is closed"),
    ),
}

# -- predicate 4: every blocker closed (D9: it self-releases) --------------------------------------

P4: dict[str, Case] = {
    "open-blocker-holds": (
        lambda: snapshot(issue(blocked_by=[12])),
        Hold(4, "blocked", "blocked by #12 (open)"),
    ),
    "blocker-closed-self-releases": (
        lambda: snapshot(issue(blocked_by=[ref(12, "closed")])),
        Go("w1"),
    ),
    "names-only-the-open-blockers": (
        lambda: snapshot(issue(blocked_by=[ref(12, "closed"), 13, 14])),
        Hold(4, "blocked", "blocked by #13, #14 (open)"),
    ),
    "cross-repo-blocker-holds": (
        lambda: snapshot(issue(blocked_by=[ref(5, "open", "other/repo")])),
        Hold(4, "blocked", "#5"),
    ),
}

# -- predicate 5: no live unit for this issue, anywhere --------------------------------------------

P5: dict[str, Case] = {
    "live-unit-holds": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", units=[unit(1)])]),
        Hold(5, "running", "w1/agent"),
    ),
    "live-unit-on-a-dark-unreachable-worker-still-holds": (
        lambda: snapshot(
            issue(),
            workers=[
                worker("w1", "a"),
                worker("w9", "z", reach=Reach.UNREACHABLE, dark=RL, units=[unit(1, "activating")]),
            ],
        ),
        Hold(5, "running", "w9"),
    ),
    "deactivating-is-still-live": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", units=[unit(1, "deactivating")])]),
        Hold(5, "running"),
    ),
    "failed-unit-does-not-hold": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", units=[unit(1, "failed")])]),
        Go("w1"),
    ),
    "another-issues-unit-does-not-hold": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", units=[unit(2)])]),
        Go("w1", "1 unit(s) live or planned"),
    ),
}

# -- predicate 6: the last marker is not a start, success, block or no-op --------------------------


def latched(kind: Kind) -> Callable[[], Snapshot]:
    return lambda: snapshot(issue(timeline=[marker(S), marker(kind)]))


P6: dict[str, Case] = {
    "start-holds": (lambda: snapshot(issue(timeline=[marker(S)])), Hold(6, "latched", "started")),
    "success-on-open-is-a-tombstone": (latched(Kind.SUCCESS), Hold(6, "tombstone", "D6")),
    "blocked-holds": (latched(Kind.BLOCKED), Hold(6, "latched", "blocker")),
    "no-op-holds": (latched(Kind.NO_OP), Hold(6, "latched", "no-op")),
    "cancelled-holds": (latched(Kind.CANCELLED), Hold(6, "latched", "cancelled")),
    "pr-open-holds": (latched(Kind.PR_OPEN), Hold(6, "latched", "PR open")),
    "cross-repo-holds": (latched(Kind.CROSS_REPO), Hold(6, "latched", "another repository")),
    "failed-releases": (latched(Kind.FAILED), Go("w1")),
    "reaped-releases": (latched(Kind.REAPED), Go("w1")),
    "stopped-releases": (latched(Kind.STOPPED), Go("w1")),
    "reopen-after-success-releases": (
        lambda: snapshot(issue(timeline=[marker(S), marker(Kind.SUCCESS), reopen()])),
        Go("w1"),
    ),
    "left-open-after-success-releases": (
        lambda: snapshot(issue(timeline=[marker(S), marker(Kind.SUCCESS), marker(Kind.LEFT_OPEN)])),
        Go("w1"),
    ),
    "glyph-less-left-open-does-not-release": (
        lambda: snapshot(
            issue(timeline=[marker(Kind.SUCCESS), comment("fleet:left-open note", author=FLEET)])
        ),
        Hold(6, "tombstone"),
    ),
    "a-humans-look-alike-success-is-ignored": (
        lambda: snapshot(issue(timeline=[marker(Kind.SUCCESS, author=HUMAN)])),
        Go("w1"),
    ),
    "a-humans-look-alike-cannot-unlatch": (
        lambda: snapshot(issue(timeline=[marker(S), marker(F, author=HUMAN)])),
        Hold(6, "latched"),
    ),
}

# -- predicate 7: non-capacity attempts under the cap (D8) -----------------------------------------


def runs(*kinds: Kind, then: Callable[[], object] | None = None) -> Callable[[], Snapshot]:
    def build() -> Snapshot:
        timeline = [marker(k) for k in kinds]
        if then is not None:
            timeline += [then(), marker(S), marker(F)]
        return snapshot(issue(timeline=timeline))

    return build


P7: dict[str, Case] = {
    "two-failures-under-cap": (runs(S, F, S, F), Go("w1")),
    "three-failures-exhaust": (runs(S, F, S, F, S, F), Hold(7, "exhausted", "3 attempts of 3")),
    "capacity-deaths-are-free": (runs(S, F, S, C, S, C, S, F), Go("w1")),
    # #16: capacity outcomes are free of the attempt budget, so they have their own bound: a model
    # printing the CLI's limit form bought a rerun each time, darkening worker after worker
    "three-capacity-outcomes-are-a-capacity-loop": (
        runs(S, C, S, C, S, C),
        Hold(7, "capacity-loop", "3 capacity outcomes of 3"),
    ),
    "release-ends-a-capacity-loop": (runs(S, C, S, C, S, C, then=release), Go("w1")),
    "retry-parks-are-free": (runs(S, P, S, F, S, P, S, F), Go("w1")),
    "reaped-orphan-counts": (runs(S, Kind.REAPED, S, F, S, F), Hold(7, "exhausted")),
    "release-resets-the-budget": (runs(S, F, S, F, S, F, then=release), Go("w1")),
    "reopen-resets-the-budget": (runs(S, F, S, F, S, F, then=reopen), Go("w1")),
    "quoted-release-does-not-reset": (
        runs(S, F, S, F, then=lambda: release("> fleet:release")),
        Hold(7, "exhausted"),
    ),
    "mid-line-release-does-not-reset": (
        runs(S, F, S, F, then=lambda: release("ok, fleet:release")),
        Hold(7, "exhausted"),
    ),
}

# -- predicate 8: no unreleased park latch; a retry park until its due time (D7) -------------------


def parked(due: str | None) -> Callable[[], Snapshot]:
    return lambda: snapshot(issue(timeline=[marker(S), marker(P, {"due": due})]))


P8: dict[str, Case] = {
    "park-holds": (
        lambda: snapshot(issue(timeline=[marker(Kind.PARK)])),
        Hold(8, "parked", "fleet:release"),
    ),
    "a-humans-park-holds": (
        lambda: snapshot(issue(timeline=[marker(Kind.PARK, author=HUMAN)])),
        Hold(8, "parked"),
    ),
    "released-park": (
        lambda: snapshot(issue(timeline=[marker(Kind.PARK), release()])),
        Go("w1"),
    ),
    "quoted-release-keeps-the-park": (
        lambda: snapshot(issue(timeline=[marker(Kind.PARK), release("> fleet:release")])),
        Hold(8, "parked"),
    ),
    "reopen-releases-the-park": (
        lambda: snapshot(issue(timeline=[marker(Kind.PARK), reopen()])),
        Go("w1"),
    ),
    "retry-park-due-in-future-holds": (
        parked((NOW + timedelta(seconds=30)).isoformat()),
        Hold(8, "parked", "retry parked until"),
    ),
    "retry-park-past-due-releases": (parked((NOW - timedelta(seconds=1)).isoformat()), Go("w1")),
    "retry-park-garbage-due-fails-open": (parked("whenever"), Go("w1")),
    "retry-park-without-due-fails-open": (parked(None), Go("w1")),
}

# -- predicate 9: no human assignee, no hold label, not a fixture, not do-not-dispatch -------------

P9: dict[str, Case] = {
    "fixture-label-never-dispatches": (
        lambda: snapshot(issue(labels=["fleet-fixture"])),
        Hold(9, "fixture", "fleet-fixture"),
    ),
    "fixture-is-named-before-anything-else": (
        lambda: snapshot(issue(labels=["fleet-fixture"], status="Done", blocked_by=[3])),
        Hold(9, "fixture"),
    ),
    "hold-label": (lambda: snapshot(issue(labels=["hold"])), Hold(9, "held", "'hold'")),
    "assignee": (lambda: snapshot(issue(assignees=["alice"])), Hold(9, "held", "alice")),
    "do-not-dispatch-title": (
        lambda: snapshot(issue(title="Probe [DO-NOT-DISPATCH]")),
        Hold(9, "held", "do-not-dispatch"),
    ),
    "other-labels-do-not-hold": (lambda: snapshot(issue(labels=["bug", "holdout"])), Go("w1")),
    "custom-hold-labels": (
        lambda: snapshot(issue(labels=["wait"]), policy=Policy(hold_labels=("wait",))),
        Hold(9, "held", "'wait'"),
    ),
}

# -- predicate 10: some worker is not capacity-dark ------------------------------------------------

P10: dict[str, Case] = {
    "all-dark": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", dark=RL), worker("w2", "b", dark=RL)]),
        Hold(10, "dark", "capacity-dark"),
    ),
    "revoked-is-dark-too": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", dark=CapacitySource.REVOKED)]),
        Hold(10, "dark"),
    ),
    "all-unreachable": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", reach=Reach.NO_RUNNER)]),
        Hold(10, "unreachable", "no worker is reachable"),
    ),
    "no-workers": (lambda: snapshot(issue(), workers=[]), Hold(10, "unreachable")),
    "one-healthy-suffices": (
        lambda: snapshot(issue(), workers=[worker("w1", "a", dark=RL), worker("w2", "b")]),
        Go("w2", "no lane"),
    ),
}

# -- predicate 11: zero OPEN sub-issues (it self-releases) -----------------------------------------

P11: dict[str, Case] = {
    "open-child-holds": (
        lambda: snapshot(issue(sub_issues=[2, ref(3, "closed")])),
        Hold(11, "grouper", "#2"),
    ),
    "closed-children-release": (
        lambda: snapshot(issue(sub_issues=[ref(2, "closed"), ref(3, "closed")])),
        Go("w1"),
    ),
}

# -- 0: the kill switches (seed 003) ---------------------------------------------------------------

HALT_ISSUE = 900


def halt_issue(body: str = "deploy freeze", state: str = "open"):
    return issue(
        HALT_ISSUE, "HALT FLEET", body=body, state=state, created_at=NOW - timedelta(hours=2)
    )


P0: dict[str, Case] = {
    "file-halt-holds-with-reason-and-age": (
        lambda: snapshot(issue(), halts=[halt("db migration", since=NOW - timedelta(minutes=5))]),
        Hold(0, "halted", "db migration"),
    ),
    "file-halt-prints-its-age": (
        lambda: snapshot(issue(), halts=[halt("x", since=NOW - timedelta(minutes=5))]),
        Hold(0, "halted", "set 5m ago"),
    ),
    "empty-reason-still-halts-and-says-so": (
        lambda: snapshot(issue(), halts=[halt(None, since=NOW)]),
        Hold(0, "halted", "no reason was recorded"),
    ),
    "halt-issue-holds": (
        lambda: snapshot(issue(), halt_issue()),
        Hold(0, "halted", "#900"),
    ),
    "halt-issue-reason-is-its-body": (
        lambda: snapshot(issue(), halt_issue()),
        Hold(0, "halted", "set 2h00m ago: deploy freeze"),
    ),
    "halt-issue-empty-body": (
        lambda: snapshot(issue(), halt_issue(body="  ")),
        Hold(0, "halted", "no reason was recorded"),
    ),
    "closed-halt-issue-does-not-halt": (
        lambda: snapshot(issue(), halt_issue(state="closed")),
        Go("w1"),
    ),
    "halt-does-not-replace-a-real-reason": (
        lambda: snapshot(issue(blocked_by=[4]), halts=[halt()]),
        Hold(4, "blocked"),
    ),
}

ALL = {
    f"p{n}-{name}": case
    for n, cases in enumerate([P0, P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11])
    for name, case in cases.items()
}


@table(ALL)
def test_predicate(build: Callable[[], Snapshot], expected: Go | Hold) -> None:
    snap = build()
    plan = select(snap)
    check(plan, expected)
    open_numbers = sorted(i.number for i in snap.issues if i.is_open)
    placed = sorted([d.issue for d in plan.dispatch] + [w.issue for w in plan.waiting])
    assert placed == open_numbers


# -- the plan as a whole ---------------------------------------------------------------------------


def test_halt_issue_is_itself_the_switch_not_work() -> None:
    plan = select(snapshot(halt_issue()))
    check(plan, Hold(0, "kill-switch", "halt switch"), HALT_ISSUE)
    assert [h.where for h in plan.halts] == [f"#{HALT_ISSUE}"]


def test_board_error_gives_an_empty_plan() -> None:
    """D5: the one place selection fails closed — an unreadable queue decides nothing."""
    plan = select(snapshot(issue(), board_error="GraphQL 502"))
    assert (plan.dispatch, plan.waiting, plan.tombstones) == ((), (), ())
    assert plan.board_error == "GraphQL 502" and plan.is_noop()
    assert "BOARD-UNREADABLE" in plan.summary()


def test_tombstones_are_reported_by_name_whatever_holds_them() -> None:
    """D6: a success marker on an open issue is a tombstone even when status or a blocker holds it."""
    tomb = [marker(S), marker(Kind.SUCCESS)]
    plan = select(
        snapshot(
            issue(1, timeline=list(tomb)),
            issue(2, status="In progress", timeline=[marker(S), marker(Kind.SUCCESS)]),
            issue(3, blocked_by=[1], timeline=[marker(S), marker(Kind.SUCCESS)]),
            issue(4, state="closed", timeline=[marker(S), marker(Kind.SUCCESS)]),
            issue(5, timeline=[marker(S), marker(Kind.SUCCESS), reopen()]),
            issue(6),
        )
    )
    assert plan.tombstones == (1, 2, 3)
    assert "tombstones=3" in plan.summary()


def test_no_concurrency_cap_and_load_spreads_within_the_lane() -> None:
    """D13: every eligible issue is dispatched; the least-loaded healthy worker is the tie-break."""
    workers = [worker("w1", "a", units=[unit(50)]), worker("w2", "a"), worker("w3", "b")]
    plan = select(snapshot(*(issue(n, lane="a") for n in range(1, 6)), workers=workers))
    assert [d.issue for d in plan.dispatch] == [1, 2, 3, 4, 5]
    assert [d.worker for d in plan.dispatch] == ["w2", "w1", "w2", "w1", "w2"]


def test_plan_is_in_issue_order_and_skips_closed_issues() -> None:
    plan = select(snapshot(issue(3), issue(1), issue(2, state="closed")))
    assert [d.issue for d in plan.dispatch] == [1, 3]
    assert plan.reason_for(2) is None


def test_plan_text_carries_no_live_closing_keyword() -> None:
    """D14: a halt reason and a lane are board text; quoted in a report they must not close."""
    plan = select(
        snapshot(
            issue(1),
            issue(2, lane="fixes #3"),
            halts=[halt("reverting, closes #1", since=NOW)],
        )
    )
    texts = [w.reason for w in plan.waiting] + [d.why for d in plan.dispatch]
    assert texts and not any(has_live_keyword(t) for t in texts)
    assert not has_live_keyword(halt_line(Halt("file", "fixes #3", None), NOW))


def test_issue_halts_matches_the_title_loosely_and_only_when_open() -> None:
    issues = [
        issue(1, "  halt fleet "),
        issue(2, "HALT FLEET", state="closed"),
        issue(3, "HALT FLEET now"),
    ]
    assert [h.where for h in issue_halts(issues, Policy(halt_title="HALT FLEET"))] == ["#1"]


@pytest.mark.parametrize(
    ("seconds", "age"),
    [(0, "0s"), (119, "119s"), (120, "2m"), (7199, "119m"), (7200, "2h00m"), (172800, "2d00h")],
    ids=str,
)
def test_halt_line_age(seconds: int, age: str) -> None:
    line = halt_line(Halt("file", "r", NOW - timedelta(seconds=seconds), "ops", "/x"), NOW)
    assert line == f"halted by file /x by ops, set {age} ago: r"


def test_halt_set_in_the_future_reads_zero_age() -> None:
    assert "set 0s ago" in halt_line(Halt("file", "r", NOW + timedelta(hours=1)), NOW)


def test_healthy_means_reachable_and_not_dark() -> None:
    ws = [worker("a"), worker("b", dark=RL), worker("c", reach=Reach.NO_PERMISSION)]
    assert [w.name for w in healthy_workers(ws)] == ["a"]


# -- safety properties over generated snapshots ----------------------------------------------------

# Strategies are built once, here: rebuilding them inside the composite on every draw cost more
# than the draws themselves. Reference and unit numbers run past the board's last number so a
# blocker, parent or unit can also point at an issue this page does not hold.
MAX_ISSUES = 8
NUMBERS = st.integers(1, MAX_ISSUES + 2)
REFS = st.builds(ref, NUMBERS, st.sampled_from(["open", "closed"]))
ENTRIES = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(list(Kind)), st.sampled_from([FLEET, FLEET, HUMAN])),
        st.sampled_from(["release", "quoted-release", "reopen", "chat"]),
    ),
    max_size=6,
)
DUES = st.sampled_from([None, "junk", (NOW + timedelta(minutes=5)).isoformat()])
BODIES = {"release": "fleet:release", "quoted-release": "> fleet:release", "chat": "looks good"}
FIELDS = {
    "title": st.sampled_from([None, None, "HALT FLEET", "x [do-not-dispatch]"]),
    "state": st.sampled_from(["open", "open", "closed"]),
    "status": st.sampled_from(["Todo", "Todo", "Todo", "Done", None]),
    "lane": st.sampled_from([None, "", "a", "b", "w1", "gpu", "fixes #3"]),
    "labels": st.lists(st.sampled_from(["fleet-fixture", "hold", "bug"]), max_size=2),
    "assignees": st.lists(st.just("alice"), max_size=1),
    "parent": st.none() | REFS,
    "blocked_by": st.lists(REFS, max_size=2),
    "sub_issues": st.lists(REFS, max_size=2),
}
UNITS = st.builds(unit, NUMBERS, st.sampled_from(["active", "failed", "inactive", "activating"]))
WORKERS = st.lists(
    st.builds(
        worker,
        st.sampled_from(["w1", "w2", "w3"]),
        st.sampled_from(["a", "b"]),
        reach=st.sampled_from([Reach.OK, Reach.OK, Reach.UNREACHABLE]),
        dark=st.sampled_from([None, None, RL]),
        units=st.lists(UNITS, max_size=3),
    ),
    max_size=3,
    unique_by=lambda w: w.name,
)
HALTS = st.lists(st.builds(halt, st.none() | CLOSING_TEXT, since=st.just(NOW)), max_size=1)


@st.composite
def boards(draw) -> Snapshot:
    """A random but well-formed board: numbers 1..n, each issue's history in time order."""
    issues = []
    for number in range(1, draw(st.integers(0, MAX_ISSUES)) + 1):
        timeline = []
        for k, entry in enumerate(draw(ENTRIES)):
            at = T0 + timedelta(minutes=number * 100 + k)
            if entry == "reopen":
                timeline.append(reopen(at=at))
            elif isinstance(entry, str):
                timeline.append(comment(BODIES[entry], at=at))
            else:
                timeline.append(marker(entry[0], {"due": draw(DUES)}, author=entry[1], at=at))
        fields = {name: draw(strategy) for name, strategy in FIELDS.items()}
        issues.append(issue(number, timeline=timeline, **fields))
    return snapshot(*issues, workers=draw(WORKERS), halts=draw(HALTS))


@FAST
@given(boards())
def test_safety_properties(snap: Snapshot) -> None:
    plan = select(snap)
    sent = [d.issue for d in plan.dispatch]
    waiting = [w.issue for w in plan.waiting]
    by_number = {i.number: i for i in snap.issues}
    # At most one dispatch per issue per plan (D4's duplicate, at the planner).
    assert len(sent) == len(set(sent))
    # Every open issue appears exactly once: dispatched XOR waiting with a named reason.
    assert sorted(sent + waiting) == sorted(n for n, i in by_number.items() if i.is_open)
    for w in plan.waiting:
        assert 0 <= w.predicate <= 11 and w.state and w.reason
    healthy_names = {w.name for w in healthy_workers(snap.workers)}
    for d in plan.dispatch:
        i = by_number[d.issue]
        assert i.is_open  # nothing closed is ever dispatched
        assert "fleet-fixture" not in i.labels  # predicate 9: the label is the whole mechanism
        assert not snap.live_units(d.issue)  # predicate 5
        assert d.worker in healthy_names  # predicate 10: never onto a dark or unreachable box
        assert not i.open_sub_issues and not i.open_blockers  # 11 and 4
    if plan.halts:
        assert not plan.dispatch
    for text in [w.reason for w in plan.waiting] + [d.why for d in plan.dispatch]:
        assert not has_live_keyword(text)  # D14
    # Deterministic: the same snapshot gives an equal plan.
    assert select(snap) == plan


@settings(max_examples=50, deadline=None)  # the branch is one line; 50 boards exercise it
@given(boards())
def test_a_board_error_plan_never_dispatches(snap: Snapshot) -> None:
    plan = select(
        Snapshot(snap.now, snap.issues, snap.workers, snap.policy, snap.halts, "unreadable")
    )
    assert plan.dispatch == () and plan.waiting == () and plan.board_error == "unreadable"
