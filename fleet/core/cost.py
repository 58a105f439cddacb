"""What reading the queue costs, cycle by cycle (D1): ``fleet-status --cost``.

D1's lesson is that one field added to a read can multiply its price; the only defence is to see
the price of every cycle. Each sweep appends its read's cost to ``state_dir/cost.jsonl`` (GraphQL
points on GitHub, SQL statements on the embedded board) — one short line per cycle, apart from the
trace, whose sweep events carry whole snapshots and would make ``--cost`` read megabytes. This
module reads those lines back and formats them next to the cost of the read ``fleet-status`` just
made. Pure: the records come in as values, so the formatting is tested without a board.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleet.core.model import iso, parse_iso

EVENT = "COST"
LOG_NAME = "cost.jsonl"
RECENT_CYCLES = 10  # how many recorded sweeps --cost lists: enough to see a trend, one screen
# GitHub's GraphQL primary limit for a user token: 5,000 points an hour ("Rate limits and query
# limits for the GraphQL API"); an Enterprise Cloud organisation's may be higher.
GITHUB_POINTS_PER_HOUR = 5000


@dataclass(frozen=True)
class CycleCost:
    at: datetime | None
    cost: int
    unit: str
    skipped: int = 0  # board items that read could not see (GitHub's partial answers)


@dataclass(frozen=True)
class Budget:
    """The backend's own account of what is left (GitHub's ``rateLimit``); None on SQLite."""

    remaining: int
    reset_at: datetime | None


def recorded_cycles(
    events: Iterable[Mapping[str, Any]], limit: int = RECENT_CYCLES
) -> list[CycleCost]:
    """The last ``limit`` sweeps that recorded a cost, oldest first; a record without a readable
    cost is skipped, never guessed."""
    out = []
    for ev in events:
        cost = ev.get("cost")
        if ev.get("event") != EVENT or isinstance(cost, bool) or not isinstance(cost, int):
            continue
        try:
            at = parse_iso(str(ev.get("at", "")))
        except ValueError:
            at = None
        skipped = ev.get("skipped")
        n = skipped if isinstance(skipped, int) and not isinstance(skipped, bool) else 0
        out.append(CycleCost(at, cost, str(ev.get("cost_unit", "")), n))
    return out[-limit:] if limit > 0 else []


def summary(cycles: Sequence[CycleCost]) -> dict[str, Any]:
    costs = [c.cost for c in cycles]
    return {
        "cycles": len(costs),
        "min": min(costs) if costs else None,
        "max": max(costs) if costs else None,
        "mean": round(sum(costs) / len(costs), 1) if costs else None,
    }


def as_json(
    now: CycleCost | None, budget: Budget | None, cycles: Sequence[CycleCost]
) -> dict[str, Any]:
    return {
        "this_read": None if now is None else {"cost": now.cost, "unit": now.unit},
        "budget": None
        if budget is None
        else {
            "remaining": budget.remaining,
            "reset_at": iso(budget.reset_at) if budget.reset_at else None,
        },
        "recorded": [
            {
                "at": iso(c.at) if c.at else None,
                "cost": c.cost,
                "unit": c.unit,
                "skipped": c.skipped,
            }
            for c in cycles
        ],
        "summary": summary(cycles),
    }


def per_hour(cost: int, period_s: int) -> tuple[float, int]:
    """(cycles an hour at the timer's period, points an hour at ``cost`` a cycle)."""
    cycles = 3600 / period_s if period_s > 0 else 0.0
    return cycles, round(cost * cycles)


def render(
    now: CycleCost | None,
    budget: Budget | None,
    cycles: Sequence[CycleCost],
    period_s: int | None = None,
) -> str:
    lines = []
    if now is None:
        lines.append("cost: this read failed, so it has no cost to show")
    else:
        lines.append(f"cost: this read {now.cost} {now.unit}".rstrip())
        if now.unit == "points" and period_s:
            n, hourly = per_hour(now.cost, period_s)
            share = 100 * hourly / GITHUB_POINTS_PER_HOUR
            lines.append(
                f"  per hour: {n:g} cycles (one per {period_s}s) x {now.cost} = {hourly} points, "
                f"{share:.1f}% of GitHub's {GITHUB_POINTS_PER_HOUR:,}-point hourly budget"
            )
    if budget is not None:
        reset = iso(budget.reset_at) if budget.reset_at else "unknown"
        lines.append(f"  budget: {budget.remaining} left, resets {reset}")
    if not cycles:
        lines.append("  no sweep has recorded a cost yet (the sweeper writes one per cycle)")
        return "\n".join(lines)
    s = summary(cycles)
    lines.append(f"  last {s['cycles']} sweeps: min {s['min']}, mean {s['mean']}, max {s['max']}")
    for c in cycles:
        unseen = f"  ({c.skipped} item(s) unreadable, skipped)" if c.skipped else ""
        lines.append(f"    {iso(c.at) if c.at else '?'}  {c.cost} {c.unit}{unseen}".rstrip())
    return "\n".join(lines)
