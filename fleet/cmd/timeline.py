"""``invoke timeline``: the picture of the fleet's runs, as a self-contained HTML page (and PNG)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from fleet.cmd.common import context, fail
from fleet.core.exits import Exit
from fleet.timeline import browser
from fleet.timeline.model import Timeline
from fleet.timeline.write import draw, parse_since, write_png


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
        tl, path = draw(
            ctx.inventory,
            ctx.board,
            now=datetime.now(UTC),
            span=span,
            out=Path(out) if out else None,
            issue=issue,
            warn=ctx.warn,
        )
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
