"""``schedule``, ``fleet-status`` and ``dispatch``: thin I/O around the pure decisions."""

from __future__ import annotations

import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit as InvokeExit

from fleet.board import unseen
from fleet.board.base import BoardPage, Skipped
from fleet.cmd.common import context, emit_json, fail, inventory, say
from fleet.context import FleetContext
from fleet.control.switches import Switches, read_switches
from fleet.core import cost
from fleet.core.exits import Exit
from fleet.core.model import Plan, Snapshot
from fleet.core.safe_text import printable
from fleet.core.select import halt_line, select
from fleet.dispatch import dispatch
from fleet.observe import read_page, snapshot
from fleet.roles.sweeper import TickOutcome, TickReport, tick, write_heartbeat
from fleet.trace import read_trace
from fleet.views.status import as_json, read_heartbeat, render


def _unopenable(inv: str | None, apply: bool, message: str, why: Exit, as_json_: bool) -> None:
    """The board could not even be opened (or its token is not the fleet's identity): fail
    closed for --apply, report in a dry run (D5), and write the heartbeat either way — every
    sweep exit path writes one (D14)."""
    invy = inventory(inv)
    code = why if apply else Exit.OK
    report = TickReport(TickOutcome.FAILED, Plan(board_error=message), exit=code)
    write_heartbeat(Path(invy.state_dir), report, datetime.now(UTC), apply=apply)
    if as_json_:
        emit_json(_tick_json(report))
    if apply:
        raise fail(code, message)
    if not as_json_:
        print(f"dry run: {message}")


def _tick_json(report: TickReport) -> dict[str, object]:
    plan = report.plan
    return {
        "outcome": report.outcome,
        "code": int(report.exit),
        "summary": plan.summary(),
        "board_error": plan.board_error,
        "dispatch": [d.__dict__ for d in plan.dispatch],
        "results": [r.to_json() for r in report.results],
        "waiting": [w.__dict__ for w in plan.waiting],
    }


def refresh_timeline(ctx: FleetContext, report: TickReport) -> None:
    """``schedule --timeline``: the page in ``state_dir`` after every tick, from this tick's own
    board read where the board cannot list closed issues (no second read, D1). The picture never
    fails the sweep: a failure to draw is one stderr line (D5)."""
    from fleet.timeline.write import SWEEP_SPAN, draw

    page = report.page.issues if report.page is not None else None
    try:
        draw(
            ctx.inventory,
            ctx.board,
            now=ctx.clock(),
            span=SWEEP_SPAN,
            open_issues=page,
            warn=ctx.warn,
        )
    except Exception as exc:  # the sweep already did its work; the picture is an extra
        ctx.warn(f"fleet: timeline not refreshed: {type(exc).__name__}: {exc}")


def schedule(inv: str | None, apply: bool, as_json_: bool, timeline: bool = False) -> None:
    try:
        ctx = context(inv, writes=apply)
    except InvokeExit as exc:
        if exc.code not in (Exit.BOARD_UNREADABLE, Exit.IDENTITY_MISMATCH):
            raise
        _unopenable(inv, apply, str(exc.message), Exit(exc.code), as_json_)
        return
    with ctx:
        try:
            report = tick(ctx, apply=apply)
        except Exception as exc:  # the heartbeat already says "crashed"; so does the exit code
            traceback.print_exc()
            raise fail(Exit.SWEEP_CRASHED, f"sweep crashed: {exc!r}") from None
        if timeline:
            refresh_timeline(ctx, report)
        plan = report.plan
        if as_json_:
            emit_json(_tick_json(report))
        else:
            say(f"{'apply' if apply else 'dry run'}: {plan.summary()}")
            for h in plan.halts if not plan.waiting else ():  # held before the probe: say why
                say(f"  HALTED — {printable(halt_line(h, ctx.clock()))}")
            for d in plan.dispatch:
                res = next((r for r in report.results if r.issue == d.issue), None)
                what = res.line() if res else f"would dispatch to {d.worker} ({d.why})"
                say(f"  #{d.issue}: {printable(what)}")
            for w in plan.waiting:
                say(f"  #{w.issue}: {w.state} (p{w.predicate}) {printable(w.reason)}")
        if report.exit is not Exit.OK:
            raise fail(report.exit, f"sweep {report.outcome}: {plan.board_error or plan.summary()}")


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
    log = Path(ctx.inventory.state_dir) / cost.LOG_NAME
    try:
        events = read_trace(log) if log.exists() else []
    except (OSError, ValueError) as exc:
        ctx.warn(f"cost log unreadable, recent cycles not shown: {exc}")
        events = []
    return now, budget, cost.recorded_cycles(events)


def dispatch_cmd(
    inv: str | None, issue: int, worker: str | None, dry_run: bool, as_json_: bool, ignore_ci: bool
) -> None:
    with context(inv, writes=not dry_run) as ctx:
        r = dispatch(ctx, issue, worker=worker, dry_run=dry_run, ignore_ci=ignore_ci)
        say(printable(r.line()), file=sys.stderr)
        if as_json_:
            emit_json(r.to_json())
        if r.code is not Exit.OK:
            raise fail(r.code, "")
