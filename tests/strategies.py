"""Hypothesis strategies for fleet's values, shared by the codec and the invariant tests.

Two kinds, for two questions:

- ``values`` strategies (:data:`SNAPSHOTS`, :data:`PLANS`) draw *any* well-typed value — arbitrary
  text, every enum member, optional fields empty or not — because a codec must round-trip every
  value the type admits, not only the ones a board produces.
- :func:`boards` draws a *well-formed* board (numbers 1..n, histories in time order, workers with
  unique names) built with tests/builders.py, because the invariants of seed 001 §13 are about what
  ``select`` decides on the snapshots production can take.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from fleet.core.markers import Kind
from fleet.core.model import (
    Capacity,
    CapacitySource,
    Comment,
    Dispatch,
    Event,
    EventKind,
    Halt,
    Issue,
    IssueRef,
    IssueState,
    Plan,
    Policy,
    Reach,
    Snapshot,
    StateReason,
    Status,
    Unit,
    Waiting,
    WaitState,
    WorkerView,
)
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
    reopen,
    snapshot,
    unit,
    worker,
)

# -- any value of the model's types ---------------------------------------------------------------

TEXT = st.text(max_size=12)
LONG_TEXT = st.text(max_size=60)
INTS = st.integers(min_value=-(2**63), max_value=2**63)
SMALL = st.integers(min_value=0, max_value=10_000)
# The model's convention: every timestamp is an aware UTC datetime with microseconds.
TIMES = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
MAYBE_TIME = st.none() | TIMES
TEXTS = st.lists(TEXT, max_size=3).map(tuple)

COMMENTS = st.builds(Comment, id=INTS, author=TEXT, body=LONG_TEXT, created_at=TIMES)
EVENTS = st.builds(Event, kind=st.sampled_from(EventKind), at=TIMES, actor=TEXT, detail=TEXT)
REFS_ANY = st.builds(IssueRef, number=SMALL, state=st.sampled_from(IssueState), repository=TEXT)
ISSUES = st.builds(
    Issue,
    number=SMALL,
    title=TEXT,
    body=LONG_TEXT,
    state=st.sampled_from(IssueState),
    state_reason=st.none() | st.sampled_from(StateReason),
    labels=TEXTS,
    assignees=TEXTS,
    status=st.none() | st.sampled_from([s.value for s in Status]) | TEXT,
    lane=st.none() | TEXT,
    parent=st.none() | REFS_ANY,
    blocked_by=st.lists(REFS_ANY, max_size=2).map(tuple),
    sub_issues=st.lists(REFS_ANY, max_size=2).map(tuple),
    comments=st.lists(COMMENTS, max_size=3).map(tuple),
    events=st.lists(EVENTS, max_size=2).map(tuple),
    created_at=MAYBE_TIME,
    updated_at=MAYBE_TIME,
    closed_at=MAYBE_TIME,
)
CAPACITIES = st.builds(
    Capacity,
    source=st.sampled_from(CapacitySource),
    reset_at=MAYBE_TIME,
    evidence=TEXT,
    written_at=MAYBE_TIME,
    issue=st.none() | SMALL,
)
UNITS_ANY = st.builds(
    Unit,
    issue=SMALL,
    worker=TEXT,
    master=TEXT,
    state=st.sampled_from(["active", "activating", "deactivating", "failed", "inactive"]) | TEXT,
    start_us=INTS,
    started_at=MAYBE_TIME,
)
WORKER_VIEWS = st.builds(
    WorkerView,
    name=TEXT,
    lane=TEXT,
    reach=st.sampled_from(Reach),
    capacity=st.none() | CAPACITIES,
    units=st.lists(UNITS_ANY, max_size=2).map(tuple),
    detail=TEXT,
    path=TEXT,
)
POLICIES = st.builds(
    Policy,
    hold_labels=TEXTS,
    fixture_label=TEXT,
    do_not_dispatch=TEXT,
    attempt_cap=SMALL,
    retry_backoffs_s=st.lists(SMALL, max_size=3).map(tuple),
    reaper_threshold_s=SMALL,
    halt_title=TEXT,
    identity=TEXT,
    timer_period_s=SMALL,
)
HALTS_ANY = st.builds(
    Halt,
    source=st.sampled_from(["file", "issue"]),
    reason=st.none() | TEXT,
    since=MAYBE_TIME,
    author=st.none() | TEXT,
    where=TEXT,
)
SNAPSHOTS = st.builds(
    Snapshot,
    now=TIMES,
    issues=st.lists(ISSUES, max_size=3).map(tuple),
    workers=st.lists(WORKER_VIEWS, max_size=2).map(tuple),
    policy=POLICIES,
    halts=st.lists(HALTS_ANY, max_size=2).map(tuple),
    board_error=st.none() | TEXT,
)
PLANS = st.builds(
    Plan,
    dispatch=st.lists(st.builds(Dispatch, SMALL, TEXT, TEXT), max_size=3).map(tuple),
    waiting=st.lists(
        st.builds(Waiting, SMALL, st.integers(0, 11), st.sampled_from(WaitState), TEXT), max_size=3
    ).map(tuple),
    tombstones=st.lists(SMALL, max_size=2).map(tuple),
    halts=st.lists(HALTS_ANY, max_size=1).map(tuple),
    board_error=st.none() | TEXT,
)

# -- well-formed boards (what select sees in production) ------------------------------------------

MAX_ISSUES = 8
# Reference and unit numbers run past the board's last number, so a blocker, a parent or a unit can
# point at an issue this page does not hold (a closed one, another repository's).
NUMBERS = st.integers(1, MAX_ISSUES + 2)
REFS = st.builds(ref, NUMBERS, st.sampled_from(["open", "closed"]))
ENTRIES = st.one_of(
    st.just([]),
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(list(Kind)), st.sampled_from([FLEET, FLEET, HUMAN])),
            st.sampled_from(["release", "reopen", "chat"]),
        ),
        max_size=5,
    ),
)
DUES = st.sampled_from(
    [None, (NOW - timedelta(minutes=5)).isoformat(), (NOW + timedelta(minutes=5)).isoformat()]
)
BODIES = {"release": "fleet:release", "chat": "looks good"}
WORKER_NAMES = ("w1", "w2", "w3", "w4")
LANES = ("a", "b")


def _rarely(common: object, *rare: object) -> st.SearchStrategy[object]:
    """``common`` most of the time (so most boards have work to dispatch), each of ``rare`` now and
    then (so every predicate still holds an issue somewhere in a run)."""
    return st.sampled_from([common] * (3 * len(rare)) + list(rare))


def _sometimes(
    rare: st.SearchStrategy[object], common: object, odds: int = 4
) -> st.SearchStrategy[object]:
    """``rare`` about once in ``odds`` draws, else ``common`` (a value or a strategy). Weighted by
    ``sampled_from``: ``one_of`` over repeated equal branches does not weight them."""
    usual = common if isinstance(common, st.SearchStrategy) else st.just(common)
    return st.sampled_from([False] * (odds - 1) + [True]).flatmap(lambda r: rare if r else usual)


def _fields(lanes: bool) -> dict[str, st.SearchStrategy[object]]:
    lane = st.sampled_from([None, None, None, "a", "b", "w2", "gpu"]) if lanes else st.none()
    return {
        # The halt title halts the whole board, so it is rarer than the other rare values.
        "title": st.sampled_from([None] * 30 + ["HALT FLEET", *["x [do-not-dispatch]"] * 3]),
        "state": _rarely("open", "closed"),
        "status": _rarely("Todo", "In progress", None),
        "lane": lane,
        "labels": _rarely((), ("fleet-fixture",), ("hold",), ("bug",), ("hold", "bug")),
        "assignees": _rarely((), ("alice",)),
        "parent": st.one_of(st.none(), st.none(), st.none(), REFS),
        "blocked_by": _sometimes(st.lists(REFS, min_size=1, max_size=2), ()),
        "sub_issues": _rarely((), (ref(MAX_ISSUES + 2, "closed"),), (ref(1),)),
    }


WORKERS = st.lists(
    st.builds(
        worker,
        st.sampled_from(WORKER_NAMES),
        st.sampled_from(LANES),
        reach=_rarely(Reach.OK, *Reach),
        dark=_rarely(None, *CapacitySource),
        units=st.lists(
            st.builds(unit, NUMBERS, st.sampled_from(["active", "failed", "activating"])),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda w: w.name,
)
FLEETS = _sometimes(st.just([]), WORKERS, odds=10)  # now and then no worker at all
HALTS = _sometimes(
    st.lists(st.builds(halt, st.none() | CLOSING_TEXT, since=st.just(NOW)), min_size=1, max_size=1),
    (),
)


@st.composite
def boards(draw: st.DrawFn, *, lanes: bool = True, halts: bool = True) -> Snapshot:
    """A random but well-formed board: numbers 1..n, each issue's history in time order."""
    fields = _fields(lanes)
    issues = []
    for number in range(1, draw(st.integers(0, MAX_ISSUES)) + 1):
        timeline: list[object] = []
        for k, entry in enumerate(draw(ENTRIES)):
            at = T0 + timedelta(minutes=number * 100 + k)
            if entry == "reopen":
                timeline.append(reopen(at=at))
            elif isinstance(entry, str):
                timeline.append(comment(BODIES[entry], at=at))
            else:
                timeline.append(marker(entry[0], {"due": draw(DUES)}, author=entry[1], at=at))
        drawn = {name: draw(strategy) for name, strategy in fields.items()}
        issues.append(issue(number, timeline=timeline, **drawn))  # type: ignore[arg-type]
    return snapshot(*issues, workers=draw(FLEETS), halts=draw(HALTS) if halts else ())
