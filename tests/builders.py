"""State builders for table tests of the pure core (nomad's scheduler tests are the shape).

A test states the board and the fleet it means in a line or two: ``issue(7, timeline=[marker(START),
marker(FAILED)])``, ``worker("w1", "a")``, ``snapshot(...)``. Every comment, marker and event built
here takes the next tick of one process-wide clock, so the order in which a test writes its history
*is* the order in which it happened — the order eligibility reads (D6) — without a test ever
spelling out a timestamp. ``NOW`` lies far after any tick this process can reach, so "now" in a
snapshot is always later than the history it judges (select takes its clock from the snapshot).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st

from fleet.core.closing import KEYWORDS
from fleet.core.markers import Kind, render
from fleet.core.model import (
    Capacity,
    CapacitySource,
    Comment,
    Event,
    EventKind,
    Halt,
    Issue,
    IssueRef,
    IssueState,
    Policy,
    Reach,
    Snapshot,
    Unit,
    WorkerView,
)

T0 = datetime(2025, 1, 1, tzinfo=UTC)
# One tick per built comment/event; a run of the whole suite builds well under a million of them
# (about 12 days of ticks), so ten years bounds "history is always before now" with a wide margin.
NOW = T0 + timedelta(days=3650)
FLEET = Policy().identity  # markers count only from the fleet's own identity (predicate 6)
HUMAN = "octocat"

_ticks = itertools.count(1)
_ids = itertools.count(1)


def tick() -> datetime:
    """The next instant of the builders' clock: strictly later than every one handed out before."""
    return T0 + timedelta(seconds=next(_ticks))


def comment(body: str, *, author: str = HUMAN, at: datetime | None = None) -> Comment:
    """A plain comment (by a human unless told otherwise) at the next tick."""
    return Comment(next(_ids), author, body, at or tick())


def marker(
    kind: Kind,
    fields: Mapping[str, object] | None = None,
    note: str = "",
    *,
    author: str = FLEET,
    at: datetime | None = None,
) -> Comment:
    """A marker comment rendered by the production renderer, posted by the fleet by default."""
    return comment(render(kind, fields, note), author=author, at=at)


def release(text: str = "fleet:release", *, author: str = HUMAN) -> Comment:
    """A human's release comment; ``text`` decides whether the token really starts a line."""
    return comment(text, author=author)


def reopen(*, actor: str = HUMAN, at: datetime | None = None) -> Event:
    return Event(EventKind.REOPENED, at or tick(), actor)


def ref(number: int, state: str = "open", repository: str = "") -> IssueRef:
    """A parent, blocker or sub-issue as the issue sees it."""
    return IssueRef(number, IssueState(state), repository)


def _refs(items: Iterable[int | IssueRef]) -> tuple[IssueRef, ...]:
    """Bare numbers mean open references: the state that holds an issue is the one tests name."""
    return tuple(ref(i) if isinstance(i, int) else i for i in items)


def issue(
    number: int = 1,
    title: str | None = None,
    *,
    timeline: Iterable[Comment | Event] = (),
    state: str = "open",
    status: str | None = "Todo",
    lane: str | None = None,
    labels: Iterable[str] = (),
    assignees: Iterable[str] = (),
    parent: int | IssueRef | None = None,
    blocked_by: Iterable[int | IssueRef] = (),
    sub_issues: Iterable[int | IssueRef] = (),
    body: str = "",
    created_at: datetime | None = None,
) -> Issue:
    """An issue that every predicate would pass unless a keyword says otherwise.

    ``timeline`` mixes comments and events in the order they happened.
    """
    items = list(timeline)
    return Issue(
        number=number,
        title=title if title is not None else f"work item {number}",
        body=body,
        state=IssueState(state),
        labels=tuple(labels),
        assignees=tuple(assignees),
        status=status,
        lane=lane,
        parent=ref(parent) if isinstance(parent, int) else parent,
        blocked_by=_refs(blocked_by),
        sub_issues=_refs(sub_issues),
        comments=tuple(c for c in items if isinstance(c, Comment)),
        events=tuple(e for e in items if isinstance(e, Event)),
        created_at=created_at or T0,
    )


def unit(issue: int, state: str = "active", *, master: str = "agent", start_us: int = 1) -> Unit:
    """A unit spec; :func:`worker` binds it to the worker that runs it."""
    return Unit(issue, "", master, state, start_us)


def worker(
    name: str = "w1",
    lane: str | None = None,
    *,
    reach: Reach = Reach.OK,
    dark: CapacitySource | None = None,
    units: Iterable[Unit] = (),
) -> WorkerView:
    """A worker; ``dark`` makes it capacity-dark with that source (D8)."""
    capacity = None if dark is None else Capacity(dark, None, f"{dark.value} in a test")
    bound = tuple(Unit(u.issue, name, u.master, u.state, u.start_us, u.started_at) for u in units)
    return WorkerView(name, lane if lane is not None else name, reach, capacity, bound)


def halt(reason: str | None = "maintenance", *, since: datetime | None = None) -> Halt:
    """The file kill switch, on."""
    return Halt("file", reason, since, None, "/var/lib/fleet/HALT")


def snapshot(
    *issues: Issue,
    workers: Iterable[WorkerView] | None = None,
    now: datetime = NOW,
    policy: Policy | None = None,
    halts: Iterable[Halt] = (),
    board_error: str | None = None,
) -> Snapshot:
    """A snapshot with one healthy worker in lane ``a`` unless ``workers`` is given."""
    return Snapshot(
        now=now,
        issues=tuple(issues),
        workers=tuple(workers) if workers is not None else (worker("w1", "a"),),
        policy=policy or Policy(),
        halts=tuple(halts),
        board_error=board_error,
    )


# Fragments that hypothesis stitches together: keywords, separators and references in every
# arrangement, so the search spends its examples near the adjacency boundary, not on random text.
FRAGMENTS = st.sampled_from(
    [
        *KEYWORDS,
        "Closes",
        "FIXES",
        "fixes:",
        "Resolved:",
        "> ",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        ":",
        "#",
        "#12",
        "#3",
        "12",
        "owner/repo#9",
        "o/r",
        "/",
        "-",
        "_",
        "`",
        "the criterion from VERIFY",
        "and",
        "pre",
        "un-",
        "\u2060",
    ]
)
CLOSING_TEXT = st.one_of(st.text(), st.lists(FRAGMENTS, max_size=12).map("".join))
