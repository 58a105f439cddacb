"""The thin I/O around the pure timeline: read the board and the trace, write the page (and PNG).

Used by ``invoke timeline``, by ``invoke demo`` at its end, and by the sweeper (``schedule --apply
--timeline``) after every tick, so any static file server of ``state_dir`` shows the fleet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleet.board.base import Board
from fleet.core.model import Issue, IssueState, parse_iso
from fleet.inventory import Inventory
from fleet.timeline import browser
from fleet.timeline.model import Timeline, WorkerRef, build
from fleet.timeline.render import page, svg

PAGE_NAME = "timeline.html"  # in state_dir: what the sweeper refreshes every tick
HEADER_PX = 150  # the page's header above the picture, for the PNG's height
_SPAN = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str) -> timedelta:
    """``--since`` as a span back from now: ``90m``, ``24h``, ``7d``, ``2w``, ``3600s``."""
    m = _SPAN.match(text or "")
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"--since {text!r}: a positive number and a unit s, m, h, d or w (24h)")
    return timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])


def board_link(inv: Inventory) -> str | None:
    """The board's page for an issue, ``{n}`` for its number; None where the board has none."""
    gh = inv.board.github
    if gh is None:
        return None
    api = gh.api_url.rstrip("/")
    web = "https://github.com" if api == "https://api.github.com" else re.sub(r"/api/v3$", "", api)
    return f"{web}/{gh.owner}/{gh.repo}/issues/{{n}}"


@dataclass(frozen=True)
class Issues:
    issues: tuple[Issue, ...]
    note: str | None  # said on the page when closed issues could not be read


def board_issues(board: Board, open_issues: Sequence[Issue] | None = None) -> Issues:
    """Every issue, closed ones too, where the board can list them (the embedded board); else the
    open issues (the page a sweep already read, or one read now), and the page says so."""
    lister = getattr(board, "list_issues", None)
    if callable(lister):
        return Issues(tuple(lister()), None)
    issues = tuple(open_issues) if open_issues is not None else board.read().issues
    return Issues(
        tuple(i for i in issues if i.state is IssueState.OPEN),
        "this board is read one page of open issues per cycle: runs of closed issues are not shown",
    )


_AT = re.compile(rb'"at": "([^"]{19,40})"')
DRAWN = frozenset({"SWEEP", "TICK", "LAND"})  # the records the timeline reads; the rest is skipped


def _early(raw: bytes, since: datetime) -> bool:
    """A record stamped before ``since``, told from its first bytes: the trace is written with
    sorted keys, so ``at`` comes first, and a day of SWEEP lines (each a whole snapshot) is never
    parsed only to be dropped."""
    m = _AT.search(raw, 0, 200)
    if m is None:
        return False
    try:
        at = parse_iso(m.group(1).decode())
    except (ValueError, UnicodeDecodeError, OverflowError):
        return False
    return at is not None and at < since


def read_records(
    path: Path, warn: Any = None, since: datetime | None = None
) -> list[dict[str, Any]]:
    """The trace's records the timeline draws (from ``since`` on). A line that cannot be read ends
    the read there and is named: the picture loses the rest of the trace, never the page. A
    missing trace is an empty one: no sweep has run here yet."""
    out: list[dict[str, Any]] = []
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        return out
    with fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip() or (since is not None and _early(raw, since)):
                continue
            try:
                record = json.loads(raw)
            except ValueError as exc:
                if warn is not None:
                    warn(f"timeline: {path}:{n}: not a JSON line ({exc}); drawing what came before")
                break
            if isinstance(record, dict) and record.get("event") in DRAWN:
                out.append(record)
    return out


def timeline_of(
    inv: Inventory,
    issues: Iterable[Issue],
    records: Sequence[dict[str, Any]],
    *,
    now: datetime,
    span: timedelta,
    issue: int | None = None,
) -> Timeline:
    workers = [WorkerRef(w.name, w.master or "") for w in inv.workers]
    return build(
        issues,
        records,
        now=now,
        since=now - span,
        workers=workers,
        identity=inv.policy.identity,
        issue=issue,
        link=board_link(inv),
    )


def write_page(
    tl: Timeline, out: Path, *, notes: Iterable[str] = (), title: str | None = None
) -> Path:
    """Write the page atomically: a file server never hands out half of it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page(tl, title=title or "fleet timeline", note=notes), encoding="utf-8")
    tmp.replace(out)
    return out


def write_png(tl: Timeline, html: Path, png: Path) -> Path:
    _markup, width, height = svg(tl)
    return browser.screenshot(html, png, width + 20, height + HEADER_PX)


def default_out(inv: Inventory) -> Path:
    return Path(inv.state_dir) / PAGE_NAME


TRACE_NAME = "trace.jsonl"
SWEEP_SPAN = timedelta(hours=24)  # what the sweeper's page shows: one day, as `invoke timeline`


def draw(
    inv: Inventory,
    board: Board,
    *,
    now: datetime,
    span: timedelta,
    out: Path | None = None,
    issue: int | None = None,
    open_issues: Sequence[Issue] | None = None,
    warn: Any = None,
    title: str | None = None,
) -> tuple[Timeline, Path]:
    """Read the board and the trace, build the timeline and write its page: the one I/O path of
    ``invoke timeline``, the demo and the sweeper."""
    issues = board_issues(board, open_issues)
    records = read_records(Path(inv.state_dir) / TRACE_NAME, warn, since=now - span)
    tl = timeline_of(inv, issues.issues, records, now=now, span=span, issue=issue)
    path = write_page(
        tl, out or default_out(inv), notes=[issues.note] if issues.note else [], title=title
    )
    return tl, path
