"""Selection: seed 003's predicates 1–11 over one frozen snapshot. Pure: no I/O, no clock.

``select(snapshot) -> Plan``. Every open issue ends in the plan either as a dispatch decision (issue,
worker, why that worker) or as a :class:`Waiting` naming the first predicate that holds it, in the
operator's words. The dispatcher re-checks every guard against fresh data under the fleet lock (D15):
this plan is the scheduler's proposal, not a permission.

There is no concurrency cap here (D13): a worker with runs going is as eligible as an idle one. The
only spreading is a tie-break — among healthy workers of the right lane, the one with the fewest live
and planned units — which changes where work goes, never how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from operator import attrgetter

from fleet.core.authority import approval_wait, halt_issues, halt_key
from fleet.core.closing import defuse, has_live_keyword
from fleet.core.exits import PRESTART_CAUSES, RunExit
from fleet.core.markers import (
    History,
    Kind,
    WordKind,
    histories,
    history,
    is_tombstone,
    parked_until,
)
from fleet.core.model import (
    Dispatch,
    Halt,
    Issue,
    LaunchDeath,
    Plan,
    Policy,
    Snapshot,
    Status,
    Unit,
    Waiting,
    WaitState,
    WorkerView,
    deaths_since,
)

_LATCH_WORDS = {
    Kind.START: "a run started and has not posted its terminal",
    Kind.SUCCESS: "success marker",
    Kind.BLOCKED: "the last run declared a blocker",
    Kind.NO_OP: "the last run produced nothing (no-op)",
    Kind.CANCELLED: "cancelled by an operator",
    Kind.PR_OPEN: "the last run left a PR open",
    Kind.CROSS_REPO: "merged in another repository, and the issue was not closed by it",
    Kind.DO_NOT_DISPATCH: "title marked do-not-dispatch",
}


def issue_halts(issues: Iterable[Issue], policy: Policy) -> tuple[Halt, ...]:
    """The second kill switch: an open issue with the configured title by a trusted author, read
    from the page the scheduler already fetched (zero extra calls). It takes the whole policy, not
    the title: a caller that knows only the title would obey anyone's halt issue."""
    return halt_issues(issues, policy)[0]


def healthy(workers: Iterable[WorkerView]) -> tuple[WorkerView, ...]:
    return tuple(w for w in workers if w.reachable and not w.dark)


# The remedy for ``dead-on-launch``: fleet-status and the announcer's report say it in these words.
DEAD_ON_LAUNCH_REMEDY = (
    "read the unit's log on that worker (journalctl --user -u task-N, or units/task-N.log in its "
    "state dir): 70 = the runner clone does not sync, 73 = the inventory (FLEET_INVENTORY must be "
    "an absolute path), the worker's entry or the board does not open, 74 = a crash with its "
    "traceback, 76 = the worker's token is not the board identity; fix it, then comment a line fleet:release (or reopen) to launch it again"
)


def _cause(code: int) -> str:
    try:
        return PRESTART_CAUSES.get(RunExit(code), "died")
    except ValueError:
        return "died"


def dead_on_launch_reason(deaths: Sequence[LaunchDeath], cap: int) -> str:
    """The words for ``dead-on-launch``: how many, where, and each exit's cause (fleet.core.exits)."""
    seen = sorted({(d.worker, d.exit) for d in deaths})
    where = ", ".join(f"{w} exit {c} ({d})" for w, c, d in ((w, c, _cause(c)) for w, c in seen))
    return (
        f"{len(deaths)} launches died before their start marker (cap {cap}): {where}; "
        "no sweep relaunches it"
    )


def _latched(h: History) -> str | None:
    last = h.last
    if last is None or last.kind is not WordKind.MARKER or last.marker is None:
        return None
    return _LATCH_WORDS.get(last.marker.kind)


def marked_do_not_dispatch(title: str, marker: str) -> bool:
    """The title carries the do-not-dispatch marker (pre-flight check 3; predicate 9's hold)."""
    return bool(marker) and marker.casefold() in title.casefold()


def _hold(issue: Issue, snap: Snapshot) -> str | None:
    policy = snap.policy  # the fixture label is predicate 9's first question, asked in _reason
    if policy.report_label and policy.report_label in issue.labels:
        return f"labelled {policy.report_label} (an announcer's report is not work)"
    holds = [lbl for lbl in issue.labels if lbl in policy.hold_labels]
    if holds:
        return f"hold label {holds[0]!r}"
    if issue.assignees:
        return f"assigned to {', '.join(issue.assignees)} (a human owns it)"
    if marked_do_not_dispatch(issue.title, policy.do_not_dispatch):
        return f"title marked {policy.do_not_dispatch}"
    return None


def _closed(state: object) -> bool:
    return str(state) == "closed"


_TODO = Status.TODO.value  # an enum member's value is a descriptor call: read it once
_NUMBER = attrgetter("number")


@dataclass(frozen=True)
class _Sweep:
    """What select reads of the snapshot once for all its issues, so each issue's predicates cost
    the same on any board: the live units and launch deaths by issue (a scan of every worker per
    issue grows with the fleet times the board), the lanes, the issues titled like the halt switch
    (the halt issues are read from them, and each is held as the switch itself)."""

    lanes: frozenset[str]
    any_healthy: bool
    titled: frozenset[int]  # id() of each open issue titled like the halt switch, held by select
    live: Mapping[int, Sequence[Unit]]
    deaths: Mapping[int, tuple[LaunchDeath, ...]]

    @classmethod
    def of(cls, snap: Snapshot, any_healthy: bool, titled: Iterable[Issue]) -> _Sweep:
        live: dict[int, list[Unit]] = {}
        deaths: dict[int, list[LaunchDeath]] = {}
        for w in snap.workers:  # in the snapshot's order, as Snapshot.live_units lists them
            for u in w.units:
                if u.live:
                    live.setdefault(u.issue, []).append(u)
            for d in w.deaths:
                deaths.setdefault(d.issue, []).append(d)
        lanes = frozenset({w.lane for w in snap.workers} | {w.name for w in snap.workers})
        died = {issue: tuple(ds) for issue, ds in deaths.items()}
        return cls(lanes, any_healthy, frozenset(map(id, titled)), live, died)


def _reason(issue: Issue, snap: Snapshot, sweep: _Sweep, h: History) -> Waiting | None:
    n, p = issue.number, snap.policy
    if id(issue) in sweep.titled:
        ignored = p.trust.distrust(issue.author, issue.author_association)
        if ignored is not None:
            return Waiting(n, 0, WaitState.SWITCH, f"a halt issue NOT obeyed: {ignored}")
        return Waiting(n, 0, WaitState.SWITCH, "this issue is the halt switch itself")
    # 9 (fixture only, checked first): a probe must never look like anything but a fixture.
    if p.fixture_label in issue.labels:
        return Waiting(
            n, 9, WaitState.FIXTURE, f"labelled {p.fixture_label} (a test fixture is never work)"
        )
    # 1
    if issue.status != _TODO:
        return Waiting(
            n, 1, WaitState.NOT_QUEUED, f"status is {issue.status or 'unset'!r}, not 'Todo'"
        )
    # 12 (issue 16): work from an untrusted author waits for a trusted approval
    unapproved = approval_wait(issue, p)
    if unapproved is not None:
        return Waiting(n, 12, WaitState.UNAPPROVED, unapproved)
    # 2
    if issue.lane and issue.lane not in sweep.lanes:
        return Waiting(
            n, 2, WaitState.LANE_UNKNOWN, f"lane {issue.lane!r} names no worker in the inventory"
        )
    # 3 — the seed's wording: "the parent is open, or there is none": a closed parent means the
    # grouping was disposed of, so its children are not work any more.
    if issue.parent is not None and _closed(issue.parent.state):
        return Waiting(n, 3, WaitState.PARENT_CLOSED, f"parent #{issue.parent.number} is closed")
    # 4
    blockers = issue.open_blockers if issue.blocked_by else ()  # most name none: no tuple built
    if blockers:
        refs = ", ".join(f"#{b}" for b in blockers)
        return Waiting(n, 4, WaitState.BLOCKED, f"blocked by {refs} (open)")
    # 5
    live = sweep.live.get(n)
    if live:
        where = ", ".join(f"{u.worker}/{u.master}" for u in live)
        return Waiting(n, 5, WaitState.RUNNING, f"running on {where}")
    # 6-8
    if issue.unreadable:
        return Waiting(n, 6, WaitState.UNREADABLE, f"not judged: {issue.unreadable}")
    marked = marker_hold(issue, h, p, snap.now)
    if marked is not None:
        return marked
    # 7, continued: deaths before the start marker are in the workers' launch records, not on the
    # board, so only the snapshot can count them
    died = sweep.deaths.get(n)
    deaths = deaths_since(died, h.last.at if h.last is not None else None) if died else ()
    if len(deaths) >= p.attempt_cap:  # no marker counts these, so they are counted here
        return Waiting(n, 7, WaitState.DEAD_ON_LAUNCH, dead_on_launch_reason(deaths, p.attempt_cap))
    # 9
    hold = _hold(issue, snap)
    if hold is not None:
        return Waiting(n, 9, WaitState.HELD, hold)
    # 10
    if not sweep.any_healthy:
        if any(w.reachable for w in snap.workers):
            return Waiting(n, 10, WaitState.DARK, "every reachable worker is capacity-dark")
        return Waiting(n, 10, WaitState.UNREACHABLE, "no worker is reachable")
    # 11
    if issue.sub_issues and issue.open_sub_issues:
        refs = ", ".join(f"#{s}" for s in issue.open_sub_issues)
        return Waiting(
            n, 11, WaitState.GROUPER, f"has open sub-issues {refs} (a grouper is not the work)"
        )
    return None


def marker_hold(issue: Issue, h: History, p: Policy, now: datetime) -> Waiting | None:
    """Predicates 6-8, what the issue's own markers say: the scheduler asks it of its page and
    dispatch asks it again of its fresh read of the one issue (D15)."""
    n = issue.number
    # 6
    latch = _latched(h)
    if latch is not None:
        if is_tombstone(issue, h):
            return Waiting(
                n, 6, WaitState.TOMBSTONE, "success marker on an open issue (tombstone, D6)"
            )
        return Waiting(n, 6, WaitState.LATCHED, latch)
    # 7
    if h.attempts >= p.attempt_cap:
        return Waiting(n, 7, WaitState.EXHAUSTED, f"{h.attempts} attempts of {p.attempt_cap} spent")
    if len(h.capacity) >= p.capacity_cap:
        where = ", ".join(h.capacity)
        return Waiting(
            n,
            7,
            WaitState.CAPACITY_LOOP,
            f"{len(h.capacity)} capacity outcomes of {p.capacity_cap} ({where})",
        )
    # 8
    if h.park is not None:
        return Waiting(
            n, 8, WaitState.PARKED, "park latch not released (post a line 'fleet:release')"
        )
    due = parked_until(h)
    if due is not None and due > now:
        return Waiting(
            n, 8, WaitState.PARKED, f"retry parked until {due.isoformat(timespec='seconds')}"
        )
    return None


def fresh_hold(issue: Issue, p: Policy, now: datetime) -> Waiting | None:
    """What dispatch re-asks of its fresh read of one issue (D15): approval (predicate 12) and the
    markers (6-8). The sweeper's page may be a cycle old, and on GitHub it may miss markers a flood
    of comments pushed out of its window; the fresh read pages every comment."""
    unapproved = approval_wait(issue, p)
    if unapproved is not None:
        return Waiting(issue.number, 12, WaitState.UNAPPROVED, unapproved)
    return marker_hold(issue, history(issue, p), p, now)


def live_load(workers: Iterable[WorkerView]) -> dict[str, int]:
    """Live units per worker: the tie-break that spreads work (never a cap, D13)."""
    return {w.name: sum(1 for u in w.units if u.live) for w in workers}


def choose_worker(
    issue: Issue, pool: tuple[WorkerView, ...], load: dict[str, int]
) -> tuple[str, str]:
    """Lane first for locality, then any healthy worker (predicate 2's lesson). The sweeper's plan
    and the hand path's ``dispatch`` without ``--worker`` both choose with this one function."""
    # Predicate 2 accepts a lane that names a worker's lane or the worker itself; both are locality.
    in_lane = [w for w in pool if issue.lane and issue.lane in (w.lane, w.name)]
    candidates, why = (in_lane, f"lane {issue.lane}") if in_lane else (list(pool), "")
    if not why:
        why = "no lane" if not issue.lane else f"lane {issue.lane} has no healthy worker; any"
    best = min(candidates, key=lambda w: (load[w.name], w.name))
    return best.name, f"{why}; {load[best.name]} unit(s) live or planned there"


def select(snap: Snapshot) -> Plan:
    """Predicates 1–11 over one snapshot, in one pass."""
    open_issues = tuple(i for i in snap.issues if i.is_open)
    title = halt_key(snap.policy.halt_title)
    titled = tuple(i for i in open_issues if halt_key(i.title) == title)
    halts = tuple(snap.halts) + issue_halts(titled, snap.policy)
    if snap.board_error is not None:
        return Plan(board_error=snap.board_error, halts=halts)
    pool = healthy(snap.workers)
    load = live_load(snap.workers)
    sweep = _Sweep.of(snap, bool(pool), titled)
    dispatch: list[Dispatch] = []
    waiting: list[Waiting] = []
    tombstones: list[int] = []
    ordered = sorted(open_issues, key=_NUMBER)
    for issue, h in zip(ordered, histories(ordered, snap.policy), strict=True):
        # The tombstone detector (D6) reports every open issue whose last word is a success, not
        # only those that reach predicate 6: one whose Status already moved off Todo, or that is
        # blocked, is still a tombstone holding its dependants.
        if is_tombstone(issue, h):
            tombstones.append(issue.number)
        why = _reason(issue, snap, sweep, h)
        if why is None and halts:
            why = Waiting(issue.number, 0, WaitState.HALTED, _halt_line(halts[0], snap))
        if why is not None:
            # Reasons quote board text (a lane, a halt reason): never a live closing keyword (D14).
            if has_live_keyword(why.reason):
                why = replace(why, reason=defuse(why.reason))
            waiting.append(why)
            continue
        worker, because = choose_worker(issue, pool, load)
        load[worker] += 1
        dispatch.append(Dispatch(issue.number, worker, defuse(because)))
    return Plan(tuple(dispatch), tuple(waiting), tuple(tombstones), halts)


def _halt_line(h: Halt, snap: Snapshot) -> str:
    return halt_line(h, snap.now)


def halt_line(h: Halt, now: datetime) -> str:
    """Every halt line prints the reason and the switch's age (seed 003, kill switches)."""
    reason = defuse(h.reason) if h.reason else "no reason was recorded"  # quoted text: D14
    age = ""
    if h.since is not None:
        secs = max(0, int((now - h.since).total_seconds()))
        age = f", set {age_text(secs)} ago"
    who = f" by {h.author}" if h.author else ""
    return f"halted by {h.source} {h.where}{who}{age}: {reason}"


def age_text(secs: int) -> str:
    if secs < 120:
        return f"{secs}s"
    if secs < 7200:
        return f"{secs // 60}m"
    if secs < 172800:
        return f"{secs // 3600}h{(secs % 3600) // 60:02d}m"
    return f"{secs // 86400}d{(secs % 86400) // 3600:02d}h"
