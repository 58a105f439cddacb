"""fleet-status: every item and every worker named in the seeds' words, read-only.

"Start with a read-only 'why is this item not moving' flag, which is 90% of the value for 5% of
the code" (seed 003). A newcomer reading it must never conclude the fleet is broken when it is
doing what the seeds describe (seed 001 §11), so:

* every item has a state word and a reason: eligible, running (where, since when), parked until T,
  blocked by #N, held (label / assignee), dark (source, reset or "unknown"), unreachable,
  tombstone, exhausted attempts, halted — and the rest of select's words;
* every worker has one: healthy, dark, unreachable (or the check-8 answer that is not "ok");
* every switch is shown, on or off: the halt file (reason, age), the halt issue, PAUSE, DRAIN;
* the heartbeat's age and outcome tell "nothing to do" from "not running" (D14);
* the close rule (seed 001 §13) says whether the fleet is idle and, if not, what is still out.

Pure apart from :func:`read_heartbeat`: :func:`report` turns one snapshot, one plan, the heartbeat
and the switches into typed rows (a :class:`StatusReport` of :class:`ItemRow`, :class:`WorkerRow`
with its :class:`UnitRow`, :class:`SwitchRows`), and the text (:func:`render`) and the JSON
(:func:`as_json`) both read those rows, so ``--json`` says exactly what the text says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet.control.switches import Switch, Switches, SwitchName
from fleet.core.authority import halt_issues
from fleet.core.canary import CANARY, canary_text
from fleet.core.idle import IdleVerdict, idle, place
from fleet.core.markers import History, Kind, history, parked_until
from fleet.core.model import (
    CapacitySource,
    HaltSource,
    Plan,
    Reach,
    Snapshot,
    Unit,
    Waiting,
    WaitState,
    WorkerView,
    parse_iso,
    unit_name,
)
from fleet.core.safe_text import printable
from fleet.core.select import DEAD_ON_LAUNCH_REMEDY, age_text, halt_line

HEARTBEAT_FILE = "heartbeat.json"
HEALTHY = "healthy"

# What each sweep outcome means, in the operator's words (fleet.roles.sweeper.TickReport.outcome).
_OUTCOMES = {
    "idle": "the last sweep found nothing to dispatch",
    "dispatched": "the last sweep dispatched work",
    "halted": "the last sweep saw a kill switch on and dispatched nothing",
    "failed": "the last sweep failed",
    "dry-run": "the last sweep was a dry run and dispatched nothing",
}


def read_heartbeat(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / HEARTBEAT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ago(now: datetime, then: datetime) -> str:
    return age_text(max(0, int((now - then).total_seconds())))


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def _since(then: datetime | None, now: datetime) -> tuple[str | None, str | None]:
    """A row's ``since`` and ``age``: the wall-clock stamp and how long ago, or neither when the
    time is not known."""
    if then is None:
        return None, None
    return _stamp(then), _ago(now, then)


def heartbeat_line(hb: dict[str, Any] | None, now: datetime, period_s: int) -> str:
    """Fresh and idle = nothing to do; stale or missing = the sweeper is not running (D14)."""
    if hb is None:
        return (
            "heartbeat: none — NOT RUNNING: no sweep has written one to this state dir "
            "(the sweeper has never run here, or runs with another state_dir)"
        )
    try:
        at = parse_iso(str(hb.get("at")))
    except ValueError:
        at = None
    if at is None:
        return f"heartbeat: unreadable timestamp {hb.get('at')!r} — cannot tell if the sweeper runs"
    outcome = str(hb.get("outcome"))
    meaning = _OUTCOMES.get(outcome, f"unknown outcome {outcome!r}")
    if outcome == "failed":
        meaning += f" (exit {hb.get('exit')}: {hb.get('summary')})"
    counts = hb.get("counts")
    if isinstance(counts, dict) and counts:
        meaning += " [" + ", ".join(f"{k} {v}" for k, v in counts.items()) + "]"
    age = int((now - at).total_seconds())
    head = f"heartbeat: {age_text(max(age, 0))} ago, outcome {outcome}"
    if age > 2 * period_s:
        return (
            f"{head} — NOT RUNNING: older than twice the timer period ({period_s}s); "
            f"before it stopped, {meaning}"
        )
    return f"{head} — {meaning}"


# -- items ---------------------------------------------------------------------------------------
def _running(w: Waiting, snap: Snapshot, h: History | None) -> str:
    parts = []
    for u in snap.live_units(w.issue):
        since = (
            f" since {_stamp(u.started_at)} ({_ago(snap.now, u.started_at)} ago)"
            if u.started_at
            else ""
        )
        parts.append(f"{place(u.worker, u.master)}{since}")
    text = f"running on {', '.join(parts)}" if parts else w.reason
    start = h.last_of(Kind.START) if h is not None else None
    if start is not None and start.get("baseline") == "red":  # check 7 is advisory
        text += "; started on a red CI baseline: a failure it ends in spends no attempt"
    return text


def _unreachable_workers(snap: Snapshot) -> list[WorkerView]:
    return [v for v in snap.workers if not v.reachable]


def _in_flight_without_unit(w: Waiting, snap: Snapshot, started: datetime) -> str:
    age = _ago(snap.now, started)
    blind = _unreachable_workers(snap)
    if blind:
        names = ", ".join(v.name for v in blind)
        return (
            f"in flight: start marker {age} ago and no live unit on the reachable workers; "
            f"{names} could not be checked, so the run may be live there (not an orphan yet)"
        )
    return (
        f"in flight: start marker {age} ago and no live unit anywhere: orphaned — `invoke reap` "
        f"resets it once the start is older than {snap.policy.reaper_threshold_s}s"
    )


def _dark_workers(snap: Snapshot) -> str:
    return "; ".join(f"{v.name}: {_worker_reason(v, snap.now)}" for v in snap.workers if v.dark)


def explain(w: Waiting, snap: Snapshot) -> str:
    """select's reason, with the where/since/until/remedy a newcomer needs to read it as normal."""
    issue = snap.issue(w.issue)
    h = history(issue, snap.policy) if issue is not None else None
    if w.state == WaitState.RUNNING:
        return _running(w, snap, h)
    if w.state == WaitState.LATCHED and h is not None:
        last = h.last_marker
        if last is not None and last.kind is Kind.START:
            return _in_flight_without_unit(w, snap, last.at)
        return f"{w.reason} — a latch: reopen it or comment a line fleet:release to run it again"
    if w.state == WaitState.PARKED and h is not None:
        due = parked_until(h)
        if due is not None and h.park is None:
            return f"parked until {_stamp(due)} (in {_ago(due, snap.now)}): a retry (D7)"
    if w.state == WaitState.DARK:
        return f"{w.reason}: {_dark_workers(snap)}"
    if w.state == WaitState.UNREACHABLE:
        blind = "; ".join(f"{v.name}: {v.reach.value} ({v.detail})" for v in snap.workers)
        return f"{w.reason}: {blind}"
    if w.state == WaitState.EXHAUSTED:
        return (
            f"exhausted attempts: {w.reason} — a human decides; comment a line fleet:release "
            "(or reopen) for a fresh budget"
        )
    if w.state == WaitState.CAPACITY_LOOP:
        return (
            f"hitting limits worker after worker: {w.reason} since the last release — the issue "
            "itself may be the cause (read the runs' agent.log); comment a line fleet:release "
            "(or reopen) to run it again"
        )
    if w.state == WaitState.DEAD_ON_LAUNCH:
        return f"{w.reason} — {DEAD_ON_LAUNCH_REMEDY}"
    if w.state == WaitState.TOMBSTONE:
        return (
            f"{w.reason}: the run reported success but the issue is still open — close it if "
            "the work landed, or comment a line fleet:release to run it again"
        )
    return w.reason


def _holds(switches: Switches | None) -> tuple[SwitchName | None, str]:
    if switches is None:
        return None, ""
    if switches.pause is not None:
        return SwitchName.PAUSE, "but PAUSE is on: only cancels are decided"
    if switches.drain is not None:
        return SwitchName.DRAIN, "but DRAIN is on: no new work starts"
    return None, ""


def field_json(row: Any) -> dict[str, Any]:
    """A row's JSON: its fields in their declared order (the keys operators and tests read), a
    tuple as a list, a nested row as its own JSON."""

    def value(v: Any) -> Any:
        if isinstance(v, tuple):
            return [value(x) for x in v]
        to_json = getattr(v, "to_json", None)
        return to_json() if callable(to_json) else v

    return {f.name: value(getattr(row, f.name)) for f in fields(row)}


class FieldRow:
    """A row whose JSON is :func:`field_json` of itself: what most rows say in ``--json``."""

    def to_json(self) -> dict[str, Any]:
        return field_json(self)


@dataclass(frozen=True)
class ItemRow(FieldRow):
    """One open issue as fleet-status shows it: its state word, the predicate holding it (None for
    an eligible item), the reason in the operator's words, the switch holding an eligible item
    back, its title, and the steering the fleet did not obey (issue 16)."""

    issue: int
    state: WaitState
    predicate: int | None
    reason: str
    held_by: SwitchName | None
    title: str
    ignored: tuple[str, ...]

    def lines(self) -> list[str]:
        pred = f"p{self.predicate}" if self.predicate is not None else "  "
        reason, title = printable(self.reason), printable(self.title)  # board text: one line each
        head = f"  #{self.issue:<5} {self.state:<12} {pred:<4} {reason}  — {title}"
        return [head] + [f"  {'':<6} {'':<12} {'':<4} NOT OBEYED — {i}" for i in self.ignored]


def item_rows(snap: Snapshot, plan: Plan, switches: Switches | None = None) -> tuple[ItemRow, ...]:
    """Every item of the plan, by issue number: the dispatched ones first among equals."""
    held_by, held = _holds(switches)
    by_number = {i.number: i for i in snap.issues}

    def row(
        number: int, state: WaitState, pred: int | None, reason: str, by: SwitchName | None
    ) -> ItemRow:
        found = by_number.get(number)
        # Steering the fleet did not obey, named so nobody mistakes it for a fleet that ignores
        # its operators (issue 16): a stranger's release, reopen, hold or look-alike marker.
        ignored = (
            tuple(i.line() for i in history(found, snap.policy).ignored)
            if found is not None
            else ()
        )
        title = found.title if found is not None else ""
        return ItemRow(number, state, pred, reason, by, title, ignored)

    out: list[ItemRow] = []
    for d in plan.dispatch:
        reason = f"would dispatch to {d.worker} ({d.why})"
        reason = f"{reason} — {held}" if held else reason
        out.append(row(d.issue, WaitState.ELIGIBLE, None, reason, held_by))
    for w in plan.waiting:
        out.append(row(w.issue, w.state, w.predicate, explain(w, snap), None))
    return tuple(sorted(out, key=lambda r: r.issue))


# -- workers -------------------------------------------------------------------------------------
def _worker_state(v: WorkerView) -> str:
    if v.reach is Reach.UNREACHABLE:
        return WaitState.UNREACHABLE
    if not v.reachable:
        return v.reach.value  # no-permission / no-runner: check 8's other answers (D20)
    if v.canary:
        return CANARY  # dark, but its one probe run may go now (fleet.core.canary)
    return WaitState.DARK if v.dark else HEALTHY


def _worker_reason(v: WorkerView, now: datetime) -> str:
    if not v.reachable:
        return f"{v.reach.value}: {v.detail}" if v.detail else v.reach.value
    cap = v.capacity
    if cap is None:
        return ""
    reset = _stamp(cap.reset_at) if cap.reset_at else "unknown"
    if cap.source is CapacitySource.REVOKED:
        remedy = "a clock never clears it: renew the credential and delete the capacity file"
    elif cap.reset_at is None:
        remedy = (
            "the provider stated no reset; a clean run that starts after it heals it — "
            + canary_text(cap, v.units, now)
        )
    elif cap.reset_at > now:
        remedy = f"clears on a clock, in {_ago(cap.reset_at, now)}"
    else:
        remedy = "the stated reset has passed; the next clean run heals it"
    return f"source {cap.source.value}, reset {reset} — {remedy}"


@dataclass(frozen=True)
class UnitRow(FieldRow):
    """One supervised unit on a worker: the supervisor's state word, and since when (wall clock)."""

    issue: int
    master: str
    state: str
    live: bool
    start_us: int
    since: str | None
    age: str | None

    def text(self) -> str:
        at = f"@{self.master}" if self.master else ""
        since = f" since {self.since} ({self.age} ago)" if self.since else ""
        return f"{unit_name(self.issue)}{at} {self.state}{since}"


@dataclass(frozen=True)
class WorkerRow(FieldRow):
    """One worker: healthy, dark, canary, unreachable or check 8's other answer, why, its units."""

    name: str
    lane: str
    state: str
    reason: str
    units: tuple[UnitRow, ...]

    def line(self) -> str:
        units = ", ".join(u.text() for u in self.units) or "no units"
        extra = f" ({self.reason})" if self.reason else ""
        return f"  {self.name:<12} lane={self.lane:<10} {self.state}{extra}; {units}"


def _unit_row(u: Unit, now: datetime) -> UnitRow:
    return UnitRow(u.issue, u.master, u.state, u.live, u.start_us, *_since(u.started_at, now))


def worker_rows(snap: Snapshot) -> tuple[WorkerRow, ...]:
    return tuple(
        WorkerRow(
            name=v.name,
            lane=v.lane,
            state=_worker_state(v),
            reason=_worker_reason(v, snap.now),
            units=tuple(_unit_row(u, snap.now) for u in v.units),
        )
        for v in snap.workers
    )


# -- switches ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlagRow:
    """PAUSE or DRAIN: ``on`` is None when this caller did not read the switches; the rest is
    filled only when it is on."""

    on: bool | None
    path: str | None = None
    reason: str | None = None
    author: str | None = None
    since: str | None = None
    age: str | None = None

    def line(self, name: str, meaning: str) -> str:
        if self.on is None:
            return f"  {name:<11} not read by this caller"
        if not self.on:
            return f"  {name:<11} off"
        who = f" by {self.author}" if self.author else ""
        age = f", {self.age} ago" if self.age else ""
        why = self.reason or "no reason was recorded"
        return f"  {name:<11} ON — set{who}{age}: {why} ({meaning})"

    def to_json(self) -> dict[str, Any]:
        if not self.on:
            return {"on": self.on}
        return {
            "on": True,
            "path": self.path,
            "reason": self.reason,
            "author": self.author,
            "since": self.since,
            "age": self.age,
        }


def _flag_row(s: Switch | None, now: datetime) -> FlagRow:
    if s is None:
        return FlagRow(on=False)
    return FlagRow(True, s.path, s.reason, s.author, *_since(s.since, now))


@dataclass(frozen=True)
class HaltFileRow(FieldRow):
    on: bool
    lines: tuple[str, ...]  # one halt line per halt the file holds


@dataclass(frozen=True)
class HaltIssueRow(FieldRow):
    on: bool
    title: str  # the halt issue's title (policy.halt_title)
    lines: tuple[str, ...]  # one halt line per halt issue obeyed
    ignored: tuple[str, ...]  # the halt issues not obeyed (issue 16)


@dataclass(frozen=True)
class SwitchRows(FieldRow):
    """Every switch, on or off."""

    halt_file: HaltFileRow
    halt_issue: HaltIssueRow
    pause: FlagRow
    drain: FlagRow

    def lines(self) -> list[str]:
        hf, hi = self.halt_file, self.halt_issue
        lines = ["switches:"]
        lines += [f"  {'halt file':<11} ON — {line}" for line in hf.lines] or [
            f"  {'halt file':<11} off"
        ]
        lines += [f"  {'halt issue':<11} ON — {line}" for line in hi.lines] or [
            f"  {'halt issue':<11} none open (title {hi.title!r})"
        ]
        lines += [f"  {'':<11} NOT OBEYED — {line}" for line in hi.ignored]
        lines.append(self.pause.line("PAUSE", "only cancels are decided; live runs go on"))
        lines.append(self.drain.line("DRAIN", "no new work starts; in-flight runs finish"))
        return lines


def switch_rows(snap: Snapshot, plan: Plan, switches: Switches | None) -> SwitchRows:
    """Every switch, on or off. PAUSE/DRAIN are ``on=None`` when this caller did not read them."""
    files = tuple(halt_line(h, snap.now) for h in plan.halts if h.source == HaltSource.FILE)
    issues = tuple(halt_line(h, snap.now) for h in plan.halts if h.source == HaltSource.ISSUE)
    _, ignored = halt_issues(snap.issues, snap.policy)
    unknown = FlagRow(on=None)
    return SwitchRows(
        halt_file=HaltFileRow(bool(files), files),
        halt_issue=HaltIssueRow(
            bool(issues), snap.policy.halt_title, issues, tuple(i.line() for i in ignored)
        ),
        pause=_flag_row(switches.pause, snap.now) if switches else unknown,
        drain=_flag_row(switches.drain, snap.now) if switches else unknown,
    )


# -- the whole report ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StatusReport:
    """Everything fleet-status says, from one snapshot, one plan, the heartbeat and the switches:
    :meth:`text` and :meth:`to_json` read these rows and nothing else."""

    now: datetime
    halts: tuple[str, ...]  # one halt line per halt in force
    board_error: str | None
    heartbeat: dict[str, Any] | None  # the heartbeat file as the last sweep wrote it
    heartbeat_line: str
    switches: SwitchRows
    idle: IdleVerdict
    workers: tuple[WorkerRow, ...]
    items: tuple[ItemRow, ...]  # only the asked issue's when ``issue`` is set
    issue: int | None

    def text(self) -> str:
        lines = [f"HALTED — {line}" for line in self.halts]
        if self.switches.pause.on:
            lines.append("PAUSED — only cancels are decided (see switches)")
        if self.switches.drain.on:
            lines.append("DRAINING — no new work starts (see switches and idle)")
        if self.board_error:
            lines.append(f"BOARD UNREADABLE — {self.board_error} (an --apply sweep refuses to run)")
        lines.append(self.heartbeat_line)
        lines += self.switches.lines()
        lines.append(self.idle.line())
        lines.append("workers:")
        lines += [w.line() for w in self.workers]
        lines.append("items:")
        if not self.items:
            none = (
                "  (no open issues)"
                if self.issue is None
                else f"  #{self.issue}: not an open issue"
            )
            lines.append(none)
        for r in self.items:
            lines += r.lines()
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now.isoformat(),
            "items": [r.to_json() for r in self.items],
            "workers": [w.to_json() for w in self.workers],
            "halts": list(self.halts),
            "switches": self.switches.to_json(),
            "idle": self.idle.to_json(),
            "heartbeat": self.heartbeat,
            "heartbeat_line": self.heartbeat_line,
            "board_error": self.board_error,
        }


def report(
    snap: Snapshot,
    plan: Plan,
    hb: dict[str, Any] | None,
    period_s: int,
    issue: int | None = None,
    *,
    switches: Switches | None = None,
) -> StatusReport:
    """The rows of fleet-status, from values only (``issue`` keeps that one item)."""
    rows = item_rows(snap, plan, switches)
    return StatusReport(
        now=snap.now,
        halts=tuple(halt_line(h, snap.now) for h in plan.halts),
        board_error=plan.board_error,
        heartbeat=hb,
        heartbeat_line=heartbeat_line(hb, snap.now, period_s),
        switches=switch_rows(snap, plan, switches),
        idle=idle(snap),
        workers=worker_rows(snap),
        items=tuple(r for r in rows if issue is None or r.issue == issue),
        issue=issue,
    )


def render(
    snap: Snapshot,
    plan: Plan,
    hb: dict[str, Any] | None,
    period_s: int,
    issue: int | None = None,
    *,
    switches: Switches | None = None,
) -> str:
    return report(snap, plan, hb, period_s, issue, switches=switches).text()


def as_json(
    snap: Snapshot,
    plan: Plan,
    hb: dict[str, Any] | None,
    issue: int | None = None,
    *,
    switches: Switches | None = None,
    period_s: int | None = None,
) -> dict[str, Any]:
    """The same facts as :func:`render`, as one object (other flags may add keys beside these)."""
    period = period_s if period_s is not None else snap.policy.timer_period_s
    return report(snap, plan, hb, period, issue, switches=switches).to_json()
