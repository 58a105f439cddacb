"""fleet-status: every item and every worker named in the seeds' words, read-only.

"Start with a read-only 'why is this item not moving' flag, which is 90% of the value for 5% of
the code" (seed 003). A newcomer reading it must never conclude the fleet is broken when it is
doing what the seeds describe, so every state has a name and a reason, and the heartbeat's age and
outcome tell "nothing to do" from "not running" (D14).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet.model import Plan, Snapshot, parse_iso
from fleet.select import ELIGIBLE, age_text, halt_line


def read_heartbeat(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / "heartbeat.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def heartbeat_line(hb: dict[str, Any] | None, now: datetime, period_s: int) -> str:
    if hb is None:
        return "heartbeat: none — the sweeper has never run here (or its state dir is elsewhere)"
    try:
        at = parse_iso(str(hb.get("at")))
    except ValueError:
        at = None
    if at is None:
        return "heartbeat: unreadable timestamp"
    age = int((now - at).total_seconds())
    stale = (
        " — STALE: older than twice the timer period, the sweeper is not running"
        if age > 2 * period_s
        else ""
    )
    return f"heartbeat: {age_text(max(age, 0))} ago, outcome {hb.get('outcome')}{stale}"


def items(snap: Snapshot, plan: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for d in plan.dispatch:
        out.append(
            {
                "issue": d.issue,
                "state": ELIGIBLE,
                "predicate": None,
                "reason": f"would dispatch to {d.worker} ({d.why})",
            }
        )
    for w in plan.waiting:
        out.append(
            {"issue": w.issue, "state": w.state, "predicate": w.predicate, "reason": w.reason}
        )
    titles = {i.number: i.title for i in snap.issues}
    for row in out:
        row["title"] = titles.get(row["issue"], "")
    return sorted(out, key=lambda r: r["issue"])


def workers(snap: Snapshot) -> list[dict[str, Any]]:
    out = []
    for v in snap.workers:
        if not v.reachable:
            state, reason = "unreachable", f"{v.reach}: {v.detail}"
        elif v.capacity is not None:
            reset = (
                v.capacity.reset_at.isoformat(timespec="minutes")
                if v.capacity.reset_at
                else "unknown"
            )
            state, reason = "dark", f"source {v.capacity.source}, reset {reset}"
        else:
            state, reason = "healthy", ""
        units = [
            {
                "issue": u.issue,
                "master": u.master,
                "state": u.state,
                "start_us": u.start_us,
                "since": u.started_at.isoformat(timespec="seconds") if u.started_at else None,
            }
            for u in v.units
        ]
        out.append(
            {"name": v.name, "lane": v.lane, "state": state, "reason": reason, "units": units}
        )
    return out


def render(
    snap: Snapshot, plan: Plan, hb: dict[str, Any] | None, period_s: int, issue: int | None = None
) -> str:
    lines = []
    for h in plan.halts:
        lines.append(f"HALTED — {halt_line(h, snap.now)}")
    if plan.board_error:
        lines.append(f"BOARD UNREADABLE — {plan.board_error} (an --apply sweep refuses to run)")
    lines.append(heartbeat_line(hb, snap.now, period_s))
    lines.append("workers:")
    for w in workers(snap):
        units = (
            ", ".join(
                f"task-{u['issue']}@{u['master']} {u['state']} since {u['since']}"
                for u in w["units"]
            )
            or "no units"
        )
        extra = f" ({w['reason']})" if w["reason"] else ""
        lines.append(f"  {w['name']:<12} lane={w['lane']:<10} {w['state']}{extra}; {units}")
    lines.append("items:")
    rows = [r for r in items(snap, plan) if issue is None or r["issue"] == issue]
    if not rows:
        lines.append("  (no open issues)" if issue is None else f"  #{issue}: not an open issue")
    for r in rows:
        pred = f"p{r['predicate']}" if r["predicate"] is not None else "  "
        lines.append(f"  #{r['issue']:<5} {r['state']:<12} {pred:<4} {r['reason']}  — {r['title']}")
    return "\n".join(lines)


def as_json(
    snap: Snapshot, plan: Plan, hb: dict[str, Any] | None, issue: int | None = None
) -> dict[str, Any]:
    rows = [r for r in items(snap, plan) if issue is None or r["issue"] == issue]
    return {
        "now": snap.now.isoformat(),
        "items": rows,
        "workers": workers(snap),
        "halts": [halt_line(h, snap.now) for h in plan.halts],
        "heartbeat": hb,
        "board_error": plan.board_error,
    }
