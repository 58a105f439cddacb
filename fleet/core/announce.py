"""The announcer's decision (D14), pure: which stalls nobody is coming for, and the report for each.

A stall is announced only when no mechanism of the fleet will ever move it:

- a **start the reaper cannot check** — the last word is a start, no live unit, older than the
  reaper threshold, and the reaper's own decision (``fleet.core.reap``) is *could-not-check* because a
  worker that may hold the unit did not answer its probe (D20): the reaper will not reset it;
- a **tombstone** — a success marker as the last word on an open issue (D6): undispatchable forever;
- a **parked item long past its due time** — nothing in this plan holds it, yet no sweep moved it;
- a **capacity-dark worker past its stated reset** (when the probe still reports it dark; today's
  probe lets a passed rate-limit reset take work again, which is the mechanism working), or with
  **no stated reset** for longer than a bound: such a worker takes one canary run per
  ``fleet.core.canary.CANARY_PERIOD_S``, and a darkness that outlived two periods is one the canary has
  not cleared;
- a **sweeper heartbeat** older than twice the timer period, or none at all: the sweeper is not
  running, which "nothing to do" must never be mistaken for (D14, D20);
- a **failure no role can classify** (seed 000's third class): handed over by the engine as it
  happens (``fleet.roles.engine.Escalation``), never guessed into retry or refuse.

The never-announce list is as load-bearing as that list (D14): an item that is running, blocked by
an open dependency, held (hold label, park latch, a human assignee, a do-not-dispatch title), parked
before its due time, a fixture, the halt switch or a report of ours is *the mechanism working*; so
is everything while the fleet is halted — the operator who pulled the switch owns the fleet's state,
and the switch stops every board writer. Each is returned as a :class:`Quiet` with its reason, so a
dry run says what it deliberately did not announce and why.

No state file: every age is the board's — a marker's timestamp against ``now``, which the role takes
from the board's own clock. The one exception is the heartbeat, the sweeper's own record of itself.
Titles carry only the stall's kind, issue number and worker name (never an age), so the same stall
always gets the same title and the role's idempotence check against the live board can match it.
Generated text never carries a live closing keyword (D14): both title and body are defused whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from fleet.core.canary import CANARY_PERIOD_S
from fleet.core.closing import defuse
from fleet.core.markers import History, Kind, history, is_tombstone, parked_until
from fleet.core.model import (
    CapacitySource,
    Issue,
    Plan,
    Policy,
    Snapshot,
    WaitState,
    WorkerView,
    iso,
    parse_iso,
)
from fleet.core.reap import ReapDecision, ReapState, reap_decisions
from fleet.core.select import (
    DEAD_ON_LAUNCH_REMEDY,
    age_text,
    halt_line,
    marked_do_not_dispatch,
    select,
)

# -- the bounds, each with the failure it prevents -------------------------------------------------

# A parked retry is due at T; the sweeper dispatches it at the first sweep after T (one timer
# period), and a sweep may be refused for reasons that clear by themselves within a sweep or two
# (the engine's retry class: the fleet lock held, a finished unit still unloading, an unsynced
# clone — fleet.roles.sweeper._RETRYABLE). Three periods past due is therefore past every delay
# the mechanism itself explains; before that a report would describe a retry that is on its way.
PARKED_OVERDUE_PERIODS = 3
# A dark worker whose stated reset passed: one timer period of grace, so a sweep that would act on
# the passed reset gets its turn before a report says nobody will.
DARK_RESET_GRACE_PERIODS = 1
# A rate limit with no stated reset: the worker takes its first canary run one CANARY_PERIOD_S
# (five hours, the provider's shortest limit window) after the limit. Two periods is the canary's
# turn plus the time its clean run would have needed to heal the worker: past it the darkness is
# one the canary did not clear (it met the limit again, or no work was there to send).
NO_RESET_BOUND_S = 2 * CANARY_PERIOD_S
# A revoked entitlement: no clock ever clears it, so waiting buys one thing only — not reporting a
# credential a human is replacing at this moment. Two sweeps is that moment.
REVOKED_BOUND_PERIODS = 2
# The heartbeat is written by every sweep on every exit path; two missed periods is not a slow
# sweep but a sweeper that is not running (fleet.views.status.heartbeat_line uses the same bound).
HEARTBEAT_STALE_PERIODS = 2


class StallKind(StrEnum):
    """One name per stall shape: each has its own remedy (D20)."""

    START_UNCHECKED = "start-unchecked"
    TOMBSTONE = "tombstone"
    PARKED_OVERDUE = "parked-overdue"
    DARK_PAST_RESET = "dark-past-reset"
    DARK_NO_RESET = "dark-no-reset"
    DARK_REVOKED = "dark-revoked"
    HEARTBEAT_STALE = "heartbeat-stale"
    HEARTBEAT_MISSING = "heartbeat-missing"
    UNCLASSIFIED = "unclassified-failure"
    DEAD_ON_LAUNCH = "dead-on-launch"


@dataclass(frozen=True)
class Stall:
    """A stall nobody is coming for. ``since`` is the timestamp its age derives from."""

    kind: StallKind
    detail: str  # the facts, one line, in the fleet's words (may quote board text)
    issue: int | None = None
    worker: str | None = None  # the worker the stall is about (or, for a start, the one not probed)
    since: datetime | None = None
    age_s: int = 0
    quoted_title: str = ""  # the stalled issue's title: attacker-controlled text, defused on output
    role: str = ""  # the role (engine loop) whose failure it is, for an unclassified failure

    @property
    def subject(self) -> str:
        if self.issue is not None:
            return f"#{self.issue}"
        if self.worker is not None:
            return f"worker {self.worker}"
        return "sweeper"

    @property
    def key(self) -> str:
        """A claim key, safe as a file name: one claim per stall while it is being filed."""
        who = str(self.issue) if self.issue is not None else (self.worker or "sweeper")
        return f"{self.kind.value}-{''.join(c if c.isalnum() or c in '-_' else '_' for c in who)}"


@dataclass(frozen=True)
class Quiet:
    """Deliberately not announced, and why: the mechanism working, or not yet a stall."""

    subject: str
    state: str
    why: str


@dataclass(frozen=True)
class Assessment:
    stalls: tuple[Stall, ...]
    quiet: tuple[Quiet, ...]
    halted: bool = False
    board_error: str | None = None

    def summary(self) -> str:
        head = f"stalls={len(self.stalls)} quiet={len(self.quiet)}"
        kinds: dict[str, int] = {}
        for s in self.stalls:
            kinds[s.kind.value] = kinds.get(s.kind.value, 0) + 1
        detail = " ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
        flags = (" HALTED" if self.halted else "") + (
            " BOARD-UNREADABLE" if self.board_error else ""
        )
        return head + flags + (f" [{detail}]" if detail else "")


@dataclass(frozen=True)
class Report:
    title: str
    body: str


# -- the decision ---------------------------------------------------------------------------------


def stalls(
    snap: Snapshot, heartbeat: Mapping[str, Any] | None, now: datetime, policy: Policy
) -> tuple[Stall, ...]:
    """Every stall nobody is coming for, in a stable order (items, workers, heartbeat)."""
    return assess(snap, heartbeat, now, policy).stalls


def assess(
    snap: Snapshot, heartbeat: Mapping[str, Any] | None, now: datetime, policy: Policy
) -> Assessment:
    """The stalls, and every candidate or waiting item deliberately left quiet, with its reason."""
    if snap.board_error is not None:
        why = f"the board could not be read ({snap.board_error}): no stall can be judged from it"
        return Assessment((), (Quiet("board", "unreadable", why),), board_error=snap.board_error)
    snap = replace(snap, now=now, policy=policy)
    plan = select(snap)
    found: list[Stall] = []
    quiet: list[Quiet] = []
    beat = _heartbeat(heartbeat, now, policy)
    sweeper_down = isinstance(beat, Stall)
    reaps = {d.issue: d for d in reap_decisions(snap)}
    for issue in sorted((i for i in snap.issues if i.is_open), key=lambda i: i.number):
        verdict = _item(issue, snap, plan, reaps.get(issue.number), sweeper_down)
        if isinstance(verdict, Stall):
            found.append(verdict)
        elif verdict is not None:
            quiet.append(verdict)
    for w in sorted(snap.workers, key=lambda v: v.name):
        verdict = _worker(w, snap)
        if isinstance(verdict, Stall):
            found.append(verdict)
        elif verdict is not None:
            quiet.append(verdict)
    if isinstance(beat, Stall):
        found.append(beat)
    else:
        quiet.append(beat)
    if plan.halts:
        # Halted: the operator who pulled the switch owns the fleet's state, and the switch stops
        # every board writer — a report filed now would be noise about a stop someone chose.
        line = halt_line(plan.halts[0], now)
        held = tuple(
            Quiet(s.subject, "halted", f"would announce {s.kind.value}, but the fleet is {line}")
            for s in found
        )
        return Assessment((), held + tuple(quiet), halted=True)
    return Assessment(tuple(found), tuple(quiet))


def _never(issue: Issue, h: History, snap: Snapshot) -> Quiet | None:
    """The never-announce list for one item: each entry is the mechanism working (D14)."""
    p, n = snap.policy, f"#{issue.number}"
    if p.report_label and p.report_label in issue.labels:
        return Quiet(n, "report", f"labelled {p.report_label}: a report is never itself announced")
    if p.fixture_label in issue.labels:
        return Quiet(n, "fixture", f"labelled {p.fixture_label}: a test fixture is never work")
    if issue.title.strip().casefold() == p.halt_title.strip().casefold():
        return Quiet(n, "kill-switch", "the halt switch itself")
    live = snap.live_units(issue.number)
    if live:
        where = ", ".join(f"{u.worker}/{u.master}" for u in live)
        return Quiet(n, "running", f"a live unit on {where}: the run is going")
    if issue.open_blockers:
        refs = ", ".join(f"#{b}" for b in issue.open_blockers)
        return Quiet(n, "blocked", f"waits for {refs}, open: the dependency is working")
    holds = [lbl for lbl in issue.labels if lbl in p.hold_labels]
    if holds:
        return Quiet(n, "held", f"hold label {holds[0]!r}: a human holds it")
    if h.park is not None:
        return Quiet(n, "held", "park latch not released: a human holds it")
    if issue.assignees:
        return Quiet(n, "held", f"assigned to {', '.join(issue.assignees)}: a human owns it")
    if marked_do_not_dispatch(issue.title, p.do_not_dispatch):
        return Quiet(n, "held", f"title marked {p.do_not_dispatch}")
    due = parked_until(h)
    if due is not None and due > snap.now:
        left = age_text(int((due - snap.now).total_seconds()))
        return Quiet(n, "parked", f"retry parked until {iso(due)} (in {left}): on its way")
    return None


def _item(
    issue: Issue,
    snap: Snapshot,
    plan: Plan,
    reap: ReapDecision | None,
    sweeper_down: bool,
) -> Stall | Quiet | None:
    h = history(issue, snap.policy)
    never = _never(issue, h, snap)
    if never is not None:
        return never
    n, now, title = issue.number, snap.now, issue.title
    if is_tombstone(issue, h):
        m = h.last_marker
        assert m is not None
        held = [f"#{i.number}" for i in snap.issues if i.is_open and n in i.open_blockers]
        holds = f"; it holds {', '.join(held)} (blocked by it)" if held else ""
        return Stall(
            StallKind.TOMBSTONE,
            f"the last word on #{n} is a success marker posted {iso(m.at)}, and #{n} is open"
            + holds,
            issue=n,
            since=m.at,
            age_s=_age(now, m.at),
            quoted_title=title,
        )
    if reap is not None:
        return _start(reap, snap, title)
    due = parked_until(h)
    if due is not None:
        return _parked(issue, due, snap, plan, sweeper_down)
    waiting = plan.reason_for(n)
    if waiting is not None and waiting.state == WaitState.DEAD_ON_LAUNCH:
        return _dead_on_launch(issue, h, snap, waiting.reason)
    if waiting is not None:
        return Quiet(f"#{n}", waiting.state, f"{waiting.reason} (p{waiting.predicate})")
    return None  # eligible: it is moving


def _dead_on_launch(issue: Issue, h: History, snap: Snapshot, reason: str) -> Stall:
    deaths = snap.launch_deaths(issue.number, h.last.at if h.last is not None else None)
    last = max(d.at for d in deaths)
    return Stall(
        StallKind.DEAD_ON_LAUNCH,
        f"#{issue.number}: {reason}",
        issue=issue.number,
        worker=sorted({d.worker for d in deaths})[0],
        since=last,
        age_s=_age(snap.now, last),
        quoted_title=issue.title,
    )


def _start(d: ReapDecision, snap: Snapshot, title: str) -> Stall | Quiet:
    n = f"#{d.issue}"
    if d.state == ReapState.COULD_NOT_CHECK:
        blind = {w.name for w in snap.workers if not w.reachable}
        worker = d.worker if d.worker in blind else None
        return Stall(
            StallKind.START_UNCHECKED,
            d.why,
            issue=d.issue,
            worker=worker,
            since=d.start_at,
            age_s=d.age_s,
            quoted_title=title,
        )
    word = {
        ReapState.REAP: "the reaper resets it",
        ReapState.LIVE: "running",
        ReapState.TOO_YOUNG: "a run in flight",
    }
    return Quiet(n, d.state, f"{d.why} — {word.get(d.state, d.state)}")


def _parked(
    issue: Issue, due: datetime, snap: Snapshot, plan: Plan, sweeper_down: bool
) -> Stall | Quiet:
    n = issue.number
    late = _age(snap.now, due)
    bound = PARKED_OVERDUE_PERIODS * snap.policy.timer_period_s
    head = f"retry parked until {iso(due)}, due {age_text(late)} ago"
    if late <= bound:
        return Quiet(f"#{n}", "parked", f"{head}: within {age_text(bound)}, a sweep is on its way")
    if sweeper_down:
        return Quiet(f"#{n}", "parked", f"{head}: the sweeper is not running (reported once there)")
    waiting = plan.reason_for(n)
    if waiting is not None:
        return Quiet(f"#{n}", waiting.state, f"{head}; {waiting.reason} (p{waiting.predicate})")
    return Stall(
        StallKind.PARKED_OVERDUE,
        f"{head}, more than {PARKED_OVERDUE_PERIODS} timer periods ({age_text(bound)}); nothing "
        "holds it in this plan, yet no sweep has dispatched it",
        issue=n,
        since=due,
        age_s=late,
        quoted_title=issue.title,
    )


def _worker(w: WorkerView, snap: Snapshot) -> Stall | Quiet | None:
    subject = f"worker {w.name}"
    cap = w.capacity
    if cap is None:
        if not w.reachable:
            return Quiet(
                subject,
                "unreachable",
                f"{w.reach}: {(w.detail or 'no detail').splitlines()[0]} — could-not-check; "
                "what it strands is announced per item",
            )
        return None
    period, now = snap.policy.timer_period_s, snap.now
    if cap.source is CapacitySource.RATE_LIMIT and cap.reset_at is not None:
        grace = DARK_RESET_GRACE_PERIODS * period
        passed = _age(now, cap.reset_at)
        if cap.reset_at > now or passed <= grace:
            when = "in " + age_text(-passed) if cap.reset_at > now else f"{age_text(passed)} ago"
            return Quiet(subject, "dark", f"rate limit, stated reset {iso(cap.reset_at)} ({when})")
        return Stall(
            StallKind.DARK_PAST_RESET,
            f"capacity-dark (rate limit) on {w.name}; the provider's stated reset "
            f"{iso(cap.reset_at)} passed {age_text(passed)} ago (evidence: {cap.evidence})",
            worker=w.name,
            since=cap.reset_at,
            age_s=passed,
        )
    since, source = dark_since(w.name, cap.issue, cap.written_at, snap)
    revoked = cap.source is CapacitySource.REVOKED
    bound = REVOKED_BOUND_PERIODS * period if revoked else NO_RESET_BOUND_S
    kind = StallKind.DARK_REVOKED if revoked else StallKind.DARK_NO_RESET
    what = "entitlement revoked" if revoked else "rate limit with no stated reset"
    age = _age(now, since) if since is not None else None
    if age is not None and age <= bound:
        return Quiet(
            subject,
            "dark",
            f"{what}, dark for {age_text(age)} (from {source}); announced past {age_text(bound)}",
        )
    dated = (
        f"since {iso(since)} ({age_text(age)}, from {source})"
        if since is not None and age is not None
        else "since unknown"
    )
    return Stall(
        kind,
        f"capacity-dark on {w.name}: {what}, {dated} (evidence: {cap.evidence})",
        worker=w.name,
        since=since,
        age_s=age or 0,
    )


def dark_since(
    worker: str, issue: int | None, written_at: datetime | None, snap: Snapshot
) -> tuple[datetime | None, str]:
    """When ``worker`` went dark, from the board: the latest capacity marker whose run's start
    named the worker (on the issue the capacity file names, when the snapshot holds it). Only when
    the board has no such marker does the capacity file's own stamp date it, and the report says so.
    """
    pool = [i for i in snap.issues if i.number == issue] or list(snap.issues)
    best: tuple[datetime, int] | None = None
    for item in pool:
        ran_on: str | None = None
        for m in history(item, snap.policy).markers:
            if m.kind is Kind.START:
                ran_on = m.get("worker")
            elif m.kind is Kind.CAPACITY and ran_on == worker and (best is None or m.at > best[0]):
                best = (m.at, item.number)
    if best is not None:
        return best[0], f"the capacity marker on #{best[1]}"
    if written_at is not None:
        return written_at, "the worker's capacity file: no capacity marker on the board"
    return None, "nowhere"


def _heartbeat(hb: Mapping[str, Any] | None, now: datetime, policy: Policy) -> Stall | Quiet:
    bound = HEARTBEAT_STALE_PERIODS * policy.timer_period_s
    at: datetime | None = None
    if hb is not None:
        try:
            at = parse_iso(str(hb.get("at")))
        except (ValueError, OverflowError):
            at = None
    if at is None:
        what = "no heartbeat file" if hb is None else "a heartbeat with no readable timestamp"
        return Stall(
            StallKind.HEARTBEAT_MISSING,
            f"{what}: the sweeper has never completed a sweep with this state directory",
        )
    age = _age(now, at)
    outcome = str(hb.get("outcome")) if hb is not None else "?"
    if age <= bound:
        return Quiet(
            "sweeper", "beating", f"heartbeat {age_text(max(age, 0))} old, outcome {outcome}"
        )
    return Stall(
        StallKind.HEARTBEAT_STALE,
        f"last heartbeat {iso(at)}, {age_text(age)} ago (outcome {outcome}); the bound is "
        f"{HEARTBEAT_STALE_PERIODS} timer periods ({age_text(bound)})",
        since=at,
        age_s=age,
    )


def unclassified_stall(role: str, item: str, detail: str) -> Stall:
    """The stall for one cannot-classify failure a role's engine handed over. ``item`` is the
    engine's key: an issue number for the sweeper, the reaper and repair; otherwise its name."""
    issue = int(item) if item.isdigit() else None
    return Stall(
        StallKind.UNCLASSIFIED,
        f"{role}: {' '.join(detail.split())}",
        issue=issue,
        worker=None if issue is not None else item,
        role=role,
    )


def _age(now: datetime, then: datetime) -> int:
    return int((now - then) / timedelta(seconds=1))


# -- the report -----------------------------------------------------------------------------------

_WHY = {
    StallKind.START_UNCHECKED: (
        "A worker that may hold the run's unit did not answer its probe, so the reaper cannot tell "
        "a live run from an orphan (could-not-check, D20) and will not reset it."
    ),
    StallKind.TOMBSTONE: (
        "The queue reads the last marker: a success on an open issue makes it undispatchable "
        "forever, and everything blocked by it waits with it (D6). No run will look at it again."
    ),
    StallKind.PARKED_OVERDUE: (
        "A parked retry is dispatched by the first sweep after its due time. This one is long past "
        "it and nothing in the plan holds it, so every sweep since has tried and been refused — "
        "or not tried at all."
    ),
    StallKind.DARK_PAST_RESET: (
        "The provider's stated reset has passed, yet the worker is still reported dark: no run is "
        "sent to a dark worker (D8), and only a clean run there clears its capacity file."
    ),
    StallKind.DARK_NO_RESET: (
        "The provider stated no reset. The worker takes one canary run per canary period, and "
        "only a clean run that started after the limit clears the capacity file (D8); this "
        "darkness has outlived two periods, so the canaries met the limit again or never went."
    ),
    StallKind.DARK_REVOKED: (
        "A revoked entitlement is not a rate limit: no clock clears it, only a human (D8)."
    ),
    StallKind.HEARTBEAT_STALE: (
        "Every sweep writes the heartbeat on every exit path — dispatched, idle, halted, failed — "
        "so an old one means no sweep is running at all, not that there is nothing to do (D14)."
    ),
    StallKind.HEARTBEAT_MISSING: (
        "Every sweep writes the heartbeat on every exit path, so none at all means the sweeper has "
        "not run here: its timer is not installed, or it writes to another state directory (D14)."
    ),
    StallKind.DEAD_ON_LAUNCH: (
        "Each launch died before its runner posted a start marker, so the board holds no trace "
        "of it and no attempt was spent; the launches are counted from the workers' own records, "
        "and past the attempt cap no sweep launches the item again."
    ),
}

_WHY[StallKind.UNCLASSIFIED] = (
    "Fleet classifies every failure three ways (seed 000): retry, refuse, or cannot-classify. This "
    "one is the third: guessing would either retry a real defect or drop a transient failure, so "
    "no role acts on it again by itself; it goes to a human instead."
)

_REMEDY = {
    StallKind.START_UNCHECKED: (
        "Bring the unprobed worker back (`fleet-status` names it and why); the reaper decides on "
        "its next run. If the run is known to be dead, `invoke cancel --issue {n}` ends it "
        "wherever it is, or a comment on the item whose first line is the release token `fleet:release` "
        "makes it eligible again."
    ),
    StallKind.TOMBSTONE: (
        "If the work is done, close the item (its PR may live in another repository, which cannot "
        "close it). If it is not, reopen it: a reopen outranks every older marker."
    ),
    StallKind.PARKED_OVERDUE: (
        "`invoke dispatch --issue {n} --dry-run` names the pre-flight check that refuses it; the "
        "sweeper's trace holds the refusals it logged."
    ),
    StallKind.DARK_PAST_RESET: (
        "Check the provider's usage; once it answers again, delete `capacity.json` in {w}'s "
        "state directory."
    ),
    StallKind.DARK_NO_RESET: (
        "Check the provider's usage; once it answers again, delete `capacity.json` in {w}'s "
        "state directory."
    ),
    StallKind.DARK_REVOKED: (
        "Renew {w}'s credential, then delete `capacity.json` in its state directory."
    ),
    StallKind.HEARTBEAT_STALE: (
        "Check the sweeper's timer on the control box, and its last run's log (`invoke schedule` "
        "by hand shows what it does)."
    ),
    StallKind.HEARTBEAT_MISSING: (
        "Install and start the sweeper's timer (docs/operations.md), or point it at the "
        "inventory's state directory."
    ),
    StallKind.UNCLASSIFIED: (
        "Read the detail above and the role's trace (`<state_dir>/trace.jsonl`, its LAND event with "
        "failure cannot-classify); fix the cause (`fleet-status`, the worker's journal). A code "
        "fleet should know is a bug in its table (docs/operations.md, the failure classes). Close "
        "this report when done: the next such failure files it again."
    ),
    StallKind.DEAD_ON_LAUNCH: DEAD_ON_LAUNCH_REMEDY.replace("task-N", "task-{n}") + " (on {w}).",
}


# One title per kind, filled from the stall: {n} the issue, {w} the worker, {where} what the
# reaper could not reach, {role} and {what} the unclassified failure's role and subject.
_TITLE = {
    StallKind.START_UNCHECKED: "fleet: stalled #{n} (start {where})",
    StallKind.TOMBSTONE: "fleet: tombstone #{n} (success marker on an open issue)",
    StallKind.PARKED_OVERDUE: "fleet: stalled #{n} (parked long past its due time)",
    StallKind.DARK_PAST_RESET: "fleet: worker {w} dark past its stated reset",
    StallKind.DARK_NO_RESET: "fleet: worker {w} dark with no stated reset",
    StallKind.DARK_REVOKED: "fleet: worker {w} dark, entitlement revoked",
    StallKind.DEAD_ON_LAUNCH: "fleet: stalled #{n} (its launches die before the start marker)",
    StallKind.HEARTBEAT_STALE: "fleet: sweeper heartbeat stale",
    StallKind.UNCLASSIFIED: "fleet: {role} could not classify a failure on {what}",
    StallKind.HEARTBEAT_MISSING: "fleet: sweeper heartbeat missing",
}


def title_for(stall: Stall) -> str:
    """Stable: the kind, the issue number, the worker name — never an age (idempotence by title)."""
    n, w = stall.issue, stall.worker
    text = _TITLE[stall.kind].format(
        n=n,
        w=w,
        where=f"on unreachable {w}" if w else "the reaper cannot check",
        role=stall.role or "a role",
        what=f"#{n}" if n is not None else (w or "an item"),
    )
    return defuse(" ".join(text.split()))


def report_for(stall: Stall) -> Report:
    """The report issue for one stall. Title and body are defused whole: a PR that quotes a report
    verbatim — to refute it — must not close anything (D14)."""
    lines = [f"**What:** {stall.detail}"]
    if stall.since is not None:
        lines.append(f"**Since:** {iso(stall.since)} ({age_text(max(stall.age_s, 0))} ago)")
    lines += [
        f"**Why nobody is coming:** {_WHY[stall.kind]}",
        "**What to do:** " + _REMEDY[stall.kind].format(n=stall.issue, w=stall.worker),
    ]
    if stall.issue is not None:
        quoted = " ".join(stall.quoted_title.split()) or "(no title)"
        lines += ["", f"> #{stall.issue}: {quoted}"]
    lines += [
        "",
        "---",
        "Filed by the fleet's announcer (D14, `invoke announce`) with the fleet's report label: a "
        "report is never dispatched. One report per stall, matched by title against the open "
        "issues: while this one is open no other is filed. Closing it while the stall persists "
        "files "
        "it again on the next run; to quiet an item on purpose, hold it (a hold label or an "
        "assignee) — a held item is never announced.",
    ]
    return Report(title_for(stall), defuse("\n".join(lines)))


__all__ = [
    "DARK_RESET_GRACE_PERIODS",
    "HEARTBEAT_STALE_PERIODS",
    "NO_RESET_BOUND_S",
    "PARKED_OVERDUE_PERIODS",
    "REVOKED_BOUND_PERIODS",
    "Assessment",
    "Quiet",
    "Report",
    "Stall",
    "StallKind",
    "assess",
    "dark_since",
    "report_for",
    "stalls",
    "title_for",
    "unclassified_stall",
]
