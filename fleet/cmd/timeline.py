"""``invoke timeline``: the picture of the fleet's runs, as a self-contained HTML page (and PNG)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fleet.cmd.common import context, fail
from fleet.exits import Exit
from fleet.timeline import browser
from fleet.timeline.model import Timeline
from fleet.timeline.write import (
    board_issues,
    default_out,
    parse_since,
    read_records,
    timeline_of,
    write_page,
    write_png,
)


def summary(tl: Timeline) -> str:
    darks = sum(len(lane.darks) for lane in tl.lanes)
    counts = ", ".join(f"{k} {v}" for k, v in tl.counts().items()) or "no runs"
    return (
        f"{len(tl.runs)} runs on {len(tl.lanes)} lanes ({counts}); {len(tl.sweeps)} sweeps, "
        f"{len(tl.bands)} holds, {darks} dark periods"
    )


def timeline(
    inv: str | None, since: str, issue: int | None, out: str | None, png: bool
) -> tuple[Path, Path | None]:
    try:
        span = parse_since(since)
    except ValueError as exc:
        raise fail(Exit.USAGE, str(exc)) from None
    with context(inv) as ctx:
        warn = ctx.warn
        issues = board_issues(ctx.board)
        state = Path(ctx.inventory.state_dir)
        records = read_records(state / "trace.jsonl", warn)
        tl = timeline_of(
            ctx.inventory, issues.issues, records, now=datetime.now(UTC), span=span, issue=issue
        )
        path = Path(out) if out else default_out(ctx.inventory)
        notes = [issues.note] if issues.note else []
        write_page(tl, path, notes=notes)
    print(f"timeline: {summary(tl)}")
    print(f"timeline: wrote {path}")
    shot = None
    if png:
        shot = path.with_suffix(".png")
        try:
            write_png(tl, path, shot)
        except browser.NoBrowser as exc:
            raise fail(Exit.NO_BROWSER, f"timeline --png: {exc}") from None
        except browser.BrowserError as exc:
            raise fail(Exit.PNG_FAILED, f"timeline --png: {exc}") from None
        print(f"timeline: wrote {shot}")
    sys.stdout.flush()
    return path, shot
