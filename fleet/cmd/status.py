"""``fleet-status``: one board read and one probe, rendered as text or JSON, or redrawn with
``--watch``. Its own module so the command imports what it shows and nothing of the sweeper or the
dispatch path (a cold ``fleet-status`` is measured against ``import invoke``, bench/cold_bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet.board import unseen
from fleet.board.base import BoardPage, Skipped
from fleet.cmd.common import context, emit_json, say
from fleet.context import FleetContext
from fleet.control.switches import Switches, read_switches
from fleet.core import cost
from fleet.core.model import Plan, Snapshot
from fleet.core.select import select
from fleet.observe import read_page, snapshot
from fleet.views.status import as_json, read_heartbeat, render


def status(inv: str | None, as_json_: bool, issue: int | None, show_cost: bool = False) -> None:
    with context(inv) as ctx:
        if not as_json_:
            say(status_text(ctx, issue, show_cost))
            return
        page, snap, plan, hb, sw, skipped = _observe(ctx)
        out = as_json(snap, plan, hb, issue, switches=sw)
        out["skipped"] = unseen.as_json(skipped)
        if show_cost:
            out["cost"] = cost.as_json(*_cost_report(ctx, page))
            out["cost"]["skipped"] = out["skipped"]
            if page is not None and page.cost_unit == "points":
                n, hourly = cost.per_hour(page.cost, ctx.inventory.policy.timer_period_s)
                out["cost"]["per_hour"] = {"cycles": n, "points": hourly,
                                           "budget": cost.GITHUB_POINTS_PER_HOUR}  # fmt: skip
        emit_json(out)


def status_text(ctx: FleetContext, issue: int | None, show_cost: bool = False) -> str:
    """fleet-status's text, read fresh: one board read, one probe (``--watch`` redraws this)."""
    page, snap, plan, hb, sw, skipped = _observe(ctx)
    lines = [render(snap, plan, hb, ctx.inventory.policy.timer_period_s, issue, switches=sw)]
    if (seen := unseen.line(skipped)) is not None:
        lines.append(seen)
    if show_cost:
        period = ctx.inventory.policy.timer_period_s
        lines.append(cost.render(*_cost_report(ctx, page), period_s=period))
        if seen is not None:
            lines.append(f"  this read's price excludes them: {seen}")
    return "\n".join(lines)


def _observe(
    ctx: FleetContext,
) -> tuple[BoardPage | None, Snapshot, Plan, dict[str, Any] | None, Switches, tuple[Skipped, ...]]:
    """One fresh look for fleet-status: the page, the snapshot and its plan, the heartbeat, the
    switches, and the board items the read could not see."""
    page, _ = read_page(ctx)
    snap = snapshot(ctx, page=page) if page is not None else snapshot(ctx)
    skipped = page.skipped if page is not None else ()
    hb = read_heartbeat(Path(ctx.inventory.state_dir))
    return page, snap, select(snap), hb, read_switches(ctx.inventory), skipped


def watch_status(inv: str | None, issue: int | None, show_cost: bool, every: float | None) -> None:
    """``fleet-status --watch``: the same text, redrawn until Ctrl-C (fleet/cmd/watch.py)."""
    from fleet.cmd.watch import DEFAULT_EVERY_S, watch

    with context(inv) as ctx:
        watch(lambda: status_text(ctx, issue, show_cost), every or DEFAULT_EVERY_S)


def _cost_report(
    ctx: FleetContext, page: BoardPage | None
) -> tuple[cost.CycleCost | None, cost.Budget | None, list[cost.CycleCost]]:
    """This read's price, the backend's remaining budget, and what recent sweeps recorded (D1)."""
    now = None if page is None else cost.CycleCost(page.read_at, page.cost, page.cost_unit)
    rl = getattr(ctx.board, "last_rate_limit", None)  # GitHub's rateLimit; SQLite has no budget
    budget = None if rl is None else cost.Budget(rl.remaining, rl.reset_at)
    from fleet.trace import read_trace

    log = Path(ctx.inventory.state_dir) / cost.LOG_NAME
    try:
        events = read_trace(log) if log.exists() else []
    except (OSError, ValueError) as exc:
        ctx.warn(f"cost log unreadable, recent cycles not shown: {exc}")
        events = []
    return now, budget, cost.recorded_cycles(events)
