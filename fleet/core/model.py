"""Frozen value types shared by every layer.

A decision is a value (seed 001): the board and the fleet are read once into these types, a pure
function turns them into a plan, and only then does anything act. Nothing here does I/O; every
timestamp is a timezone-aware UTC ``datetime`` with microseconds, because ordering markers, events and
pull requests by time is how completion is attributed (D16).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

# The unit name (D4) lives in fleet.core.names, which the worker side loads alone; re-exported.
from fleet.core.names import UNIT_PREFIX as UNIT_PREFIX
from fleet.core.names import check_issue as check_issue
from fleet.core.names import issue_of as issue_of
from fleet.core.names import unit_name as unit_name
from fleet.core.trust import EVERYONE, Trust


def utc(ts: datetime) -> datetime:
    """Return ``ts`` as an aware UTC datetime (naive input is taken to be UTC already)."""
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def iso(ts: datetime | None) -> str | None:
    """Render a timestamp the way the board stores it: ISO 8601, microseconds, ``+00:00``."""
    return None if ts is None else utc(ts).isoformat(timespec="microseconds")


def parse_iso(text: str | None) -> datetime | None:
    """Parse what :func:`iso` wrote (and GitHub's ``Z`` suffix)."""
    if text is None or text == "":
        return None
    return utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


class IssueState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class StateReason(StrEnum):
    """Why an issue is closed: GitHub's ``state_reason`` values for a closed issue."""

    COMPLETED = "completed"
    NOT_PLANNED = "not_planned"


class Status(StrEnum):
    """The board's single-select Status field. Predicate 1 reads this field, never a label."""

    TODO = "Todo"
    IN_PROGRESS = "In progress"
    DONE = "Done"


class EventKind(StrEnum):
    OPENED = "opened"
    CLOSED = "closed"
    REOPENED = "reopened"
    LABELED = "labeled"
    UNLABELED = "unlabeled"
    RENAMED = "renamed"  # the title changed: an approval given before it approves the old text


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime
    association: str | None = None  # GitHub's authorAssociation; None on the embedded board


@dataclass(frozen=True)
class Event:
    kind: EventKind
    at: datetime
    actor: str = ""
    detail: str = ""  # the label for labeled/unlabeled, the state reason for closed


@dataclass(frozen=True)
class IssueRef:
    """Another issue as this one sees it: a parent, a blocker or a sub-issue."""

    number: int
    state: IssueState
    repository: str = ""  # "" = the board's own repository


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    body: str = ""
    state: IssueState = IssueState.OPEN
    state_reason: StateReason | None = None
    labels: tuple[str, ...] = ()
    assignees: tuple[str, ...] = ()
    status: str | None = Status.TODO.value
    lane: str | None = None
    parent: IssueRef | None = None
    blocked_by: tuple[IssueRef, ...] = ()
    sub_issues: tuple[IssueRef, ...] = ()
    comments: tuple[Comment, ...] = ()
    events: tuple[Event, ...] = ()
    created_at: datetime | None = None
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    author: str = ""  # who filed it: work from an untrusted author waits for approval (trust.py)
    author_association: str | None = None  # GitHub's authorAssociation; None on the embedded board
    body_edited_at: datetime | None = None  # the body's last edit: an approval must postdate it
    # Why this one issue could not be read whole (e.g. more comments than the read pages through):
    # its markers cannot be judged, so it is held by name rather than read as empty.
    unreadable: str | None = None

    @property
    def is_open(self) -> bool:
        return self.state is IssueState.OPEN

    @property
    def open_blockers(self) -> tuple[int, ...]:
        return tuple(b.number for b in self.blocked_by if b.state is IssueState.OPEN)

    @property
    def open_sub_issues(self) -> tuple[int, ...]:
        return tuple(s.number for s in self.sub_issues if s.state is IssueState.OPEN)


class PRState(StrEnum):
    OPEN = "open"
    CLOSED = "closed"
    MERGED = "merged"


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    body: str
    branch: str
    state: PRState
    merged: bool
    created_at: datetime
    merged_at: datetime | None = None
    repository: str = ""  # "" = the board's own repository, else owner/name
    author: str = ""
    # GitHub's own record: this PR closed the issue (the issue's latest ClosedEvent names it as the
    # closer). A merged PR of another repository closes an issue by GitHub's rules; this says it did.
    closed_issue: bool = False
    # The commit the forge's merge left on main, as the forge recorded it (the embedded board; None
    # where the forge does not say). The close-out checks it against origin itself (issue 16).
    merge_commit: str | None = None


class CIState(StrEnum):
    """The target's CI on main. UNKNOWN is never treated as red (check 7)."""

    GREEN = "green"
    RED = "red"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Mention:
    id: int
    issue: int
    author: str
    body: str
    created_at: datetime
    read: bool = False
    association: str | None = None  # GitHub's authorAssociation of the author, when known


class HaltSource(StrEnum):
    """Which kill switch is on: two switches, two names (D20)."""

    FILE = "file"  # the halt file (fleet.control.switches)
    ISSUE = "issue"  # an open issue with the halt title by a trusted author (fleet.core.authority)


@dataclass(frozen=True)
class Halt:
    """A kill switch that is on, named by its :class:`HaltSource`."""

    source: HaltSource
    reason: str | None  # None = the setter recorded no reason; it still halts
    since: datetime | None  # file mtime, or the halt issue's creation time
    author: str | None = None
    where: str = ""  # the file path, or "#N"


class CapacitySource(StrEnum):
    """Two kinds of dark with opposite remedies (D8): a clock clears one, never the other."""

    RATE_LIMIT = "rate_limit"
    REVOKED = "revoked"


@dataclass(frozen=True)
class Capacity:
    """A worker's capacity state file: present = dark."""

    source: CapacitySource
    reset_at: datetime | None  # the provider's stated reset; None = unknown, never fabricated
    evidence: str
    written_at: datetime | None = None
    issue: int | None = None
    # When a canary run last started on this darkness (fleet.core.canary): a rate limit with no stated
    # reset is probed by one run per CANARY_PERIOD_S, counted from the later of the two stamps.
    canary_at: datetime | None = None


@dataclass(frozen=True)
class LaunchDeath:
    """A launch of ``task-<issue>`` whose runner exited before its start marker (exit 70, 73 or
    74 before run step 4): nothing on the board says it ran, so only this record can count it.
    Written by the runner itself into its worker's state directory (fleet.runner.prestart)."""

    issue: int
    worker: str
    run_id: str
    exit: int
    at: datetime  # the worker's clock
    why: str


class Reach(StrEnum):
    """The answer of check 8's three-token probe; UNREACHABLE covers 'no token came back'."""

    OK = "ok"
    UNREACHABLE = "unreachable"
    NO_PERMISSION = "no-permission"
    NO_RUNNER = "no-runner"


class TransportKind(StrEnum):
    """How the dispatcher reaches a worker (inventory ``transport:``, fleet.transport)."""

    LOCAL = "local"
    SSH = "ssh"


class SupervisorKind(StrEnum):
    """What runs a worker's units (inventory ``supervisor:``, fleet.units). AUTO is the inventory's
    word only: the dispatcher resolves it to SYSTEMD or PORTABLE, so a supervisor is never AUTO.
    Defined here, not in fleet.units, because the inventory reads it and the core imports no units.
    """

    AUTO = "auto"
    SYSTEMD = "systemd"
    PORTABLE = "portable"


@dataclass(frozen=True)
class Unit:
    """A live (or lingering) supervised unit ``task-<issue>`` on one worker under one master."""

    issue: int
    worker: str
    master: str
    state: str  # supervisor's ActiveState: active, activating, deactivating, failed, ...
    start_us: int  # monotonic start, microseconds (D4 repair orders by it)
    started_at: datetime | None = None  # wall clock, for humans and cross-host comparison

    @property
    def name(self) -> str:
        return unit_name(self.issue)

    @property
    def live(self) -> bool:
        return self.state in {"active", "activating", "reloading", "deactivating"}


@dataclass(frozen=True)
class WorkerView:
    """One worker as this cycle's probe saw it."""

    name: str
    lane: str
    reach: Reach
    capacity: Capacity | None = None
    units: tuple[Unit, ...] = ()
    detail: str = ""  # why it is unreachable, in the probe's words
    path: str = ""  # the worker's PATH after repair (check 0), handed to units explicitly (D3)
    # Dark with no stated reset, yet one canary run may go now (fleet.core.canary): not dark for it.
    canary: bool = False
    deaths: tuple[LaunchDeath, ...] = ()  # launches here that died before their start marker

    @property
    def reachable(self) -> bool:
        return self.reach is Reach.OK

    @property
    def dark(self) -> bool:
        return self.capacity is not None and not self.canary


@dataclass(frozen=True)
class Policy:
    """The fleet policy the pure decisions need (a projection of the inventory)."""

    hold_labels: tuple[str, ...] = ("hold",)
    fixture_label: str = "fleet-fixture"
    do_not_dispatch: str = "[do-not-dispatch]"
    attempt_cap: int = 3
    # Capacity outcomes of ONE issue since its last reopen/release. They are free of attempt_cap
    # (D8), so without their own bound an issue whose run keeps ending on a limit — a real outage,
    # or a model that prints the CLI's limit form itself — darkens worker after worker and runs
    # forever. D8's incident is the reading: one limit, then two more workers darkened by the same
    # work, three in all; a fourth is no longer the accounts' fault. A guess until measured.
    capacity_cap: int = 3
    retry_backoffs_s: tuple[int, ...] = (30, 120, 480)
    # D13's max turns per run: bounds an agent stuck in a loop of tool calls that the run-time
    # limit would let burn for an hour. Passed as the CLI's own flag where it has one (Claude Code's
    # --max-turns, fleet/agentkinds), else enforced by the runner (fleet/runner/turns.py). The seed
    # fleet's measured distribution was p90 146, max 164, and 131 runs at a cap never reached it;
    # ours is not measured yet, so the bound sits above that max: a run doing real work is never
    # cut. The experiment that settles it: the turns of this fleet's runs (num_turns, in each
    # close-out's log line), p99 plus headroom.
    max_turns: int = 200
    # D13: "2x the longest run ever observed". No run of ours is measured yet, but none can outlive
    # its unit's run-time limit (inventory DEFAULT_MAX_RUN_S = 3600 s, plus a 20 s stop grace):
    # 2 x 3600 s only ever judges runs that provably ended; the probe, not this clock, decides.
    reaper_threshold_s: int = 7200
    halt_title: str = "HALT FLEET"
    identity: str = "fleet"
    timer_period_s: int = 300
    report_label: str = "fleet-report"  # the announcer's reports: held, never dispatched
    trust: Trust = EVERYONE  # who gives work, steers and speaks to agents (inventory `trust:`)


@dataclass(frozen=True)
class Snapshot:
    """Everything one cycle knows, frozen: the board page, the fleet probe, the halts, and now."""

    now: datetime
    issues: tuple[Issue, ...]
    workers: tuple[WorkerView, ...]
    policy: Policy = field(default_factory=Policy)
    halts: tuple[Halt, ...] = ()
    board_error: str | None = None  # the queue could not be read: fail closed for --apply (D5)

    def issue(self, number: int) -> Issue | None:
        for item in self.issues:
            if item.number == number:
                return item
        return None

    def live_units(self, issue: int) -> tuple[Unit, ...]:
        return tuple(u for w in self.workers for u in w.units if u.issue == issue and u.live)

    def launch_deaths(self, issue: int, since: datetime | None) -> tuple[LaunchDeath, ...]:
        """Launches of ``issue`` that died before a start marker, after ``since`` (the issue's last
        word: a marker, a release or a reopen — each resets the count as it resets attempts)."""
        return deaths_since(
            tuple(d for w in self.workers for d in w.deaths if d.issue == issue), since
        )


def deaths_since(
    deaths: tuple[LaunchDeath, ...], since: datetime | None
) -> tuple[LaunchDeath, ...]:
    """The launch deaths after ``since`` (None: all of them), in their order."""
    return tuple(d for d in deaths if since is None or d.at > since)


# -- the plan: what one cycle decided, as a value (seed 001) -----------------------------------------


@dataclass(frozen=True)
class Dispatch:
    """Launch ``issue`` on ``worker``; ``why`` says why that worker (lane first, then any healthy)."""

    issue: int
    worker: str
    why: str


class WaitState(StrEnum):
    """The operator-facing state word of an item (fleet-status prints them; seed 001 §11: name
    every shape). ``select`` puts every state but ELIGIBLE on a :class:`Waiting`; ELIGIBLE is the
    word for an item the plan dispatches. The values are stored in traces: never rename one."""

    ELIGIBLE = "eligible"
    HALTED = "halted"
    NOT_QUEUED = "not-queued"
    LANE_UNKNOWN = "lane-unknown"
    PARENT_CLOSED = "parent-closed"
    BLOCKED = "blocked"
    RUNNING = "running"
    LATCHED = "latched"
    TOMBSTONE = "tombstone"
    EXHAUSTED = "exhausted"
    CAPACITY_LOOP = "capacity-loop"  # one issue keeps ending on limits, worker after worker
    DEAD_ON_LAUNCH = (
        "dead-on-launch"  # predicate 7's twin: launches that died before a start marker
    )
    PARKED = "parked"
    HELD = "held"
    DARK = "dark"
    UNREACHABLE = "unreachable"
    GROUPER = "grouper"
    FIXTURE = "fixture"
    SWITCH = "kill-switch"
    UNREADABLE = "unreadable"  # the issue's own history could not be read whole (predicate 6)
    UNAPPROVED = "unapproved"  # predicate 12: an untrusted author's issue nobody trusted approved


@dataclass(frozen=True)
class Waiting:
    """An open issue that is not moving, with the predicate that holds it and its named state."""

    issue: int
    predicate: int  # 0 = a kill switch; 1..11 = seed 003's predicates
    state: WaitState  # the trace codec decodes it from the annotation, so old traces replay
    reason: str


@dataclass(frozen=True)
class Plan:
    dispatch: tuple[Dispatch, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    tombstones: tuple[int, ...] = ()
    halts: tuple[Halt, ...] = ()
    board_error: str | None = None

    def is_noop(self) -> bool:
        return not self.dispatch

    def reason_for(self, issue: int) -> Waiting | None:
        return next((w for w in self.waiting if w.issue == issue), None)

    def summary(self) -> str:
        """One line for the journal: counts per bucket and per state."""
        states: dict[str, int] = {}
        for w in self.waiting:
            states[w.state] = states.get(w.state, 0) + 1
        held = " ".join(f"{k}={v}" for k, v in sorted(states.items()))
        head = f"dispatch={len(self.dispatch)} waiting={len(self.waiting)}"
        extra = f" tombstones={len(self.tombstones)}" if self.tombstones else ""
        halt = " HALTED" if self.halts else ""
        err = " BOARD-UNREADABLE" if self.board_error else ""
        return f"{head}{extra}{halt}{err}" + (f" [{held}]" if held else "")
