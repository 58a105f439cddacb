"""``schedule``: the sweeper's tick, thin I/O around the pure decisions (``fleet-status`` is
``fleet.cmd.status``, ``dispatch`` is ``fleet.cmd.dispatch``)."""

from __future__ import annotations

import traceback
from datetime import UTC, datetime
from pathlib import Path

from invoke.exceptions import Exit as InvokeExit

from fleet.cmd.common import context, emit_json, fail, inventory, say
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.model import Plan
from fleet.core.safe_text import printable
from fleet.core.select import halt_line
from fleet.roles.sweeper import TickOutcome, TickReport, tick, write_heartbeat


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
