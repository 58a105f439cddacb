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

Pure apart from :func:`read_heartbeat`: the text and the JSON are built from one snapshot, one plan,
the heartbeat and the switches, so ``--json`` says exactly what the text says.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet.control.switches import Switch, Switches, SwitchName
from fleet.core.authority import halt_issues
from fleet.core.canary import CANARY, canary_text
from fleet.core.idle import idle, place
from fleet.core.markers import History, Kind, history, parked_until
from fleet.core.model import (
    CapacitySource,
    HaltSource,
    Plan,
    Reach,
    Snapshot,
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


def _holds(switches: Switches | None) -> tuple[str | None, str]:
    if switches is None:
        return None, ""
    if switches.pause is not None:
        return SwitchName.PAUSE, "but PAUSE is on: only cancels are decided"
    if switches.drain is not None:
        return SwitchName.DRAIN, "but DRAIN is on: no new work starts"
    return None, ""


def items(snap: Snapshot, plan: Plan, switches: Switches | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    held_by, held = _holds(switches)
    for d in plan.dispatch:
        reason = f"would dispatch to {d.worker} ({d.why})"
        out.append(
            {
                "issue": d.issue,
                "state": WaitState.ELIGIBLE,
                "predicate": None,
                "reason": f"{reason} — {held}" if held else reason,
                "held_by": held_by,
            }
        )
    for w in plan.waiting:
        out.append(
            {
                "issue": w.issue,
                "state": w.state,
                "predicate": w.predicate,
                "reason": explain(w, snap),
                "held_by": None,
            }
        )
    by_number = {i.number: i for i in snap.issues}
    for row in out:
        found = by_number.get(row["issue"])
        row["title"] = found.title if found is not None else ""
        # Steering the fleet did not obey, named so nobody mistakes it for a fleet that ignores
        # its operators (issue 16): a stranger's release, reopen, hold or look-alike marker.
        row["ignored"] = (
            [i.line() for i in history(found, snap.policy).ignored] if found is not None else []
        )
    return sorted(out, key=lambda r: r["issue"])


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


def workers(snap: Snapshot) -> list[dict[str, Any]]:
    out = []
    for v in snap.workers:
        units = [
            {
                "issue": u.issue,
                "master": u.master,
                "state": u.state,
                "live": u.live,
                "start_us": u.start_us,
                "since": _stamp(u.started_at) if u.started_at else None,
                "age": _ago(snap.now, u.started_at) if u.started_at else None,
            }
            for u in v.units
        ]
        out.append(
            {
                "name": v.name,
                "lane": v.lane,
                "state": _worker_state(v),
                "reason": _worker_reason(v, snap.now),
                "units": units,
            }
        )
    return out


# -- switches ------------------------------------------------------------------------------------
def _switch_json(s: Switch | None, now: datetime) -> dict[str, Any]:
    if s is None:
        return {"on": False}
    return {
        "on": True,
        "path": s.path,
        "reason": s.reason,
        "author": s.author,
        "since": _stamp(s.since) if s.since else None,
        "age": _ago(now, s.since) if s.since else None,
    }


def switches_json(snap: Snapshot, plan: Plan, switches: Switches | None) -> dict[str, Any]:
    """Every switch, on or off. PAUSE/DRAIN are ``{"on": null}`` when this caller did not read them."""
    files = [h for h in plan.halts if h.source == HaltSource.FILE]
    issues = [h for h in plan.halts if h.source == HaltSource.ISSUE]
    unknown: dict[str, Any] = {"on": None}
    _, ignored = halt_issues(snap.issues, snap.policy)
    return {
        "halt_file": {"on": bool(files), "lines": [halt_line(h, snap.now) for h in files]},
        "halt_issue": {
            "on": bool(issues),
            "title": snap.policy.halt_title,
            "lines": [halt_line(h, snap.now) for h in issues],
            "ignored": [i.line() for i in ignored],
        },
        "pause": _switch_json(switches.pause, snap.now) if switches else unknown,
        "drain": _switch_json(switches.drain, snap.now) if switches else unknown,
    }


def _flag_line(name: str, row: dict[str, Any], meaning: str) -> str:
    if row["on"] is None:
        return f"  {name:<11} not read by this caller"
    if not row["on"]:
        return f"  {name:<11} off"
    who = f" by {row['author']}" if row["author"] else ""
    age = f", {row['age']} ago" if row["age"] else ""
    why = row["reason"] or "no reason was recorded"
    return f"  {name:<11} ON — set{who}{age}: {why} ({meaning})"


def switch_lines(sw: dict[str, Any]) -> list[str]:
    hf, hi = sw["halt_file"], sw["halt_issue"]
    lines = ["switches:"]
    lines += [f"  {'halt file':<11} ON — {line}" for line in hf["lines"]] or [
        f"  {'halt file':<11} off"
    ]
    lines += [f"  {'halt issue':<11} ON — {line}" for line in hi["lines"]] or [
        f"  {'halt issue':<11} none open (title {hi['title']!r})"
    ]
    lines += [f"  {'':<11} NOT OBEYED — {line}" for line in hi.get("ignored", [])]
    lines.append(_flag_line("PAUSE", sw["pause"], "only cancels are decided; live runs go on"))
    lines.append(_flag_line("DRAIN", sw["drain"], "no new work starts; in-flight runs finish"))
    return lines


# -- the whole report ----------------------------------------------------------------------------
def render(
    snap: Snapshot,
    plan: Plan,
    hb: dict[str, Any] | None,
    period_s: int,
    issue: int | None = None,
    *,
    switches: Switches | None = None,
) -> str:
    lines = [f"HALTED — {halt_line(h, snap.now)}" for h in plan.halts]
    if switches is not None and switches.pause is not None:
        lines.append("PAUSED — only cancels are decided (see switches)")
    if switches is not None and switches.drain is not None:
        lines.append("DRAINING — no new work starts (see switches and idle)")
    if plan.board_error:
        lines.append(f"BOARD UNREADABLE — {plan.board_error} (an --apply sweep refuses to run)")
    lines.append(heartbeat_line(hb, snap.now, period_s))
    lines += switch_lines(switches_json(snap, plan, switches))
    lines.append(idle(snap).line())
    lines.append("workers:")
    for w in workers(snap):
        units = (
            ", ".join(
                unit_name(u["issue"])
                + (f"@{u['master']}" if u["master"] else "")
                + f" {u['state']}"
                + (f" since {u['since']} ({u['age']} ago)" if u["since"] else "")
                for u in w["units"]
            )
            or "no units"
        )
        extra = f" ({w['reason']})" if w["reason"] else ""
        lines.append(f"  {w['name']:<12} lane={w['lane']:<10} {w['state']}{extra}; {units}")
    lines.append("items:")
    rows = [r for r in items(snap, plan, switches) if issue is None or r["issue"] == issue]
    if not rows:
        lines.append("  (no open issues)" if issue is None else f"  #{issue}: not an open issue")
    for r in rows:
        pred = f"p{r['predicate']}" if r["predicate"] is not None else "  "
        reason, title = printable(r["reason"]), printable(r["title"])  # board text: one line each
        lines.append(f"  #{r['issue']:<5} {r['state']:<12} {pred:<4} {reason}  — {title}")
        lines += [f"  {'':<6} {'':<12} {'':<4} NOT OBEYED — {line}" for line in r["ignored"]]
    return "\n".join(lines)


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
    rows = [r for r in items(snap, plan, switches) if issue is None or r["issue"] == issue]
    period = period_s if period_s is not None else snap.policy.timer_period_s
    return {
        "now": snap.now.isoformat(),
        "items": rows,
        "workers": workers(snap),
        "halts": [halt_line(h, snap.now) for h in plan.halts],
        "switches": switches_json(snap, plan, switches),
        "idle": idle(snap).to_json(),
        "heartbeat": hb,
        "heartbeat_line": heartbeat_line(hb, snap.now, period),
        "board_error": plan.board_error,
    }
