"""The timeline's data: runs, lanes, dark periods, sweeps and bands, as a pure function of the
markers on the board and the sweeper's trace (issue 14).

Everything a picture needs is already recorded: a start marker and a terminal marker per run (board
clock), the capacity terminal with its source and stated reset, and the sweeper's trace of every tick
(dispatcher clock). Nothing here reads a file or a clock: :func:`build` takes the issues, the trace
records and ``now``, so the same inputs always draw the same picture, and the tests state histories
as tables and as hypothesis strategies.

How a terminal marker finds its run (a start with no terminal is still open):

1. a ``run=`` field naming a start's run id (the runner's own terminals and the reaper's carry it):
   exact, whatever the clocks said — a worker whose clock is skewed stamps its start and terminal
   alike, and its markers may sort among other workers' in any order;
2. ``superseded`` names the duplicate it stopped (``stopped=worker[/master]``): the open start on
   that worker;
3. ``cancelled`` ends every open run of the issue (cancel stops ``task-N`` everywhere);
4. any other terminal ends the oldest open start of the issue (oldest wins, D4: a duplicate's
   survivor is the oldest start, so its terminal is the one that comes).

A terminal stamped before its start (two clocks disagree: the reaper's box and the worker's) is
drawn with zero length and says so, never as a negative bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from fleet.core.markers import TERMINAL, Kind, Marker, WordKind, history
from fleet.core.model import Issue, parse_iso, utc
from fleet.timeline.trace_view import Band, Dark, Sweep, bands_of, darks_of, sweeps_of

RUNNING = "running"  # a start with no terminal yet: in flight, or an orphan the reaper will reset


class Flag(StrEnum):
    """What makes a run stand out on the picture, beyond its outcome's colour."""

    DUPLICATE = "duplicate"  # another run of the same issue was open at its start (D4)
    SUPERSEDED = "superseded"  # the duplicate oldest-wins repair stopped
    REAPED = "reaped"  # an orphaned start the reaper reset: the runner died without a close-out
    AFTER_REOPEN = "after-reopen"  # the first run after a reopen or a release
    CLOCK_SKEW = "clock-skew"  # its terminal is stamped before its start: two clocks disagree


@dataclass(frozen=True)
class Run:
    """One start marker and the terminal that ended it (None: still open)."""

    issue: int
    title: str
    run_id: str
    worker: str
    master: str
    start: datetime
    end: datetime | None  # None = no terminal: drawn to ``now``
    outcome: str  # a terminal Kind's value, or RUNNING
    start_text: str  # the start marker's first line
    terminal_text: str  # the terminal marker's first line and note ("" when open)
    flags: frozenset[Flag] = frozenset()
    parked_due: datetime | None = None  # a parked retry's ``due``: drawn as a wait after the bar
    dark_source: str | None = None  # a capacity terminal's source and reset, for its label
    dark_reset: str | None = None

    def until(self, now: datetime) -> datetime:
        return self.end if self.end is not None else max(now, self.start)

    def duration_s(self, now: datetime) -> float:
        return max(0.0, (self.until(now) - self.start).total_seconds())


@dataclass(frozen=True)
class Lane:
    """One worker (and its master): the runs it carried and the periods it was capacity-dark."""

    worker: str
    master: str
    in_inventory: bool
    runs: tuple[Run, ...]
    darks: tuple[Dark, ...]

    @property
    def label(self) -> str:
        return f"{self.worker} ({self.master})" if self.master else self.worker


@dataclass(frozen=True)
class Timeline:
    since: datetime
    now: datetime
    lanes: tuple[Lane, ...]
    sweeps: tuple[Sweep, ...]
    bands: tuple[Band, ...]
    links: Mapping[int, str]  # issue -> its page on the board (absent where the board has none)

    @property
    def runs(self) -> tuple[Run, ...]:
        return tuple(r for lane in self.lanes for r in lane.runs)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return dict(sorted(out.items()))


def _first_line(m: Marker) -> str:
    fields = "".join(f" {k}={v}" for k, v in m.fields.items())
    return f"fleet:{m.kind.value}{fields}"


def _text(m: Marker) -> str:
    return _first_line(m) + (f"\n{m.note}" if m.note else "")


def _stopped_worker(m: Marker) -> tuple[str, str]:
    worker, _, master = (m.get("stopped") or "").partition("/")
    return worker, master


def _pick(open_runs: list[Run], m: Marker) -> list[Run]:
    """The open run(s) a terminal without a matching ``run=`` ends: rules 2-4."""
    if not open_runs:
        return []
    if m.kind is Kind.CANCELLED:
        return list(open_runs)
    if m.kind is Kind.SUPERSEDED:
        worker, master = _stopped_worker(m)
        hits = [r for r in open_runs if r.worker == worker and (not master or r.master == master)]
        return hits[-1:] if hits else open_runs[-1:]  # the newest: oldest wins keeps the first
    return open_runs[:1]


def _pick_index(starts: list[Run], candidates: list[int], m: Marker) -> list[int]:
    chosen = {id(r) for r in _pick([starts[i] for i in candidates], m)}
    return [i for i in candidates if id(starts[i]) in chosen]


def _close(run: Run, m: Marker) -> Run:
    flags = set(run.flags)
    end = utc(m.at)
    if end < run.start:
        flags.add(Flag.CLOCK_SKEW)
        end = run.start
    if m.kind is Kind.SUPERSEDED:
        flags.add(Flag.SUPERSEDED)
    if m.kind is Kind.REAPED:
        flags.add(Flag.REAPED)
    due = None
    if m.kind is Kind.PARKED:
        try:
            due = parse_iso(m.get("due"))
        except (ValueError, OverflowError):
            due = None  # an unreadable due is drawn without its wait, not guessed
    return replace(
        run,
        end=end,
        outcome=m.kind.value,
        terminal_text=_text(m),
        flags=frozenset(flags),
        parked_due=due,
        dark_source=m.get("source") if m.kind is Kind.CAPACITY else None,
        dark_reset=m.get("reset") if m.kind is Kind.CAPACITY else None,
    )


def runs_of(issue: Issue, identity: str | None) -> list[Run]:
    """Every run of one issue, in start order: starts paired with their terminals."""
    # Comments stamped in the same instant are ordered by their id (the board's own order), so the
    # order a board returns them in never changes the picture.
    words = sorted(
        history(issue, identity).words,
        key=lambda w: (
            utc(w.at),
            w.kind is not WordKind.MARKER,
            w.marker.comment_id if w.marker else 0,
        ),
    )
    starts: list[Run] = []
    terminals: list[Marker] = []
    fresh = False
    for w in words:
        if w.kind in (WordKind.REOPEN, WordKind.RELEASE):
            fresh = True
            continue
        m = w.marker
        assert m is not None
        if m.kind is Kind.START:
            flags = {Flag.AFTER_REOPEN} if fresh else set()
            fresh = False
            starts.append(
                Run(
                    issue.number,
                    issue.title,
                    m.get("run") or f"comment-{m.comment_id}",
                    m.get("worker") or "?",
                    "" if m.get("master") in (None, "-") else str(m.get("master")),
                    utc(m.at),
                    None,
                    RUNNING,
                    _first_line(m),
                    "",
                    frozenset(flags),
                )
            )
        elif m.kind in TERMINAL:
            terminals.append(m)
    return _pair(starts, terminals)


def _pair(starts: list[Run], terminals: list[Marker]) -> list[Run]:
    by_id = {r.run_id: i for i, r in enumerate(starts)}
    done: dict[int, Run] = {}
    rest: list[Marker] = []
    for m in terminals:  # rule 1 first, whatever the clocks: a named run is exact
        i = by_id.get(m.get("run") or "")
        if i is not None and i not in done:
            done[i] = _close(starts[i], m)
        else:
            rest.append(m)
    for m in rest:  # the others in board order, against the starts open at their time
        open_idx = [i for i, r in enumerate(starts) if i not in done and r.start <= utc(m.at)] or [
            i for i in range(len(starts)) if i not in done
        ]
        for i in _pick_index(starts, open_idx, m):
            done[i] = _close(starts[i], m)
    out = [done.get(i, r) for i, r in enumerate(starts)]
    return _mark_duplicates(out)


def _mark_duplicates(runs: list[Run]) -> list[Run]:
    out = []
    for i, r in enumerate(runs):
        overlapping = any(
            o.start <= r.start and (o.end is None or o.end > r.start)
            for j, o in enumerate(runs)
            if j != i and (o.start, j) < (r.start, i)
        )
        out.append(replace(r, flags=r.flags | {Flag.DUPLICATE}) if overlapping else r)
    return out


@dataclass(frozen=True)
class WorkerRef:
    """A worker as the inventory names it: a lane is drawn even when it ran nothing."""

    name: str
    master: str = ""


def build(
    issues: Iterable[Issue],
    trace: Sequence[Mapping[str, object]],
    *,
    now: datetime,
    since: datetime,
    workers: Sequence[WorkerRef] = (),
    identity: str | None = None,
    issue: int | None = None,
    link: str | None = None,
) -> Timeline:
    """The whole picture's data. ``link`` is the board's page URL with ``{n}`` for the number."""
    now, since = utc(now), utc(since)
    issues = sorted(issues, key=lambda i: i.number)
    runs = [r for i in issues if issue is None or i.number == issue for r in runs_of(i, identity)]
    runs = [r for r in runs if r.until(now) >= since and r.start <= now]
    sweeps = sweeps_of(trace)
    darks = darks_of(trace, runs, now)
    bands = tuple(b for b in bands_of(trace, now) if b.end >= since)
    drawn = [r.start for r in runs] + [s.at for s in sweeps] + [b.start for b in bands]
    since = fit(since, now, drawn + [d.start for d in darks])
    lanes = _lanes(runs, darks, workers, since, now)
    visible = tuple(s for s in sweeps if since <= s.at <= now)
    links = {i.number: link.format(n=i.number) for i in issues} if link else {}
    return Timeline(since, now, lanes, visible, bands, links)


FIT_MARGIN = 0.03  # air before the first thing drawn, as a fraction of what is drawn
FIT_MIN = timedelta(seconds=10)  # a window is never narrower: one sweep still has room


def fit(since: datetime, now: datetime, times: Sequence[datetime]) -> datetime:
    """The window's start: ``since``, or later when nothing happened before — a demo of thirty
    seconds drawn on a day's axis would be one smear at the right edge."""
    inside = [t for t in times if since <= t <= now]
    if not inside:
        return since
    first = min(inside)
    margin = max((now - first) * FIT_MARGIN, FIT_MIN)
    return max(since, first - margin)


def _lanes(
    runs: list[Run],
    darks: Sequence[Dark],
    workers: Sequence[WorkerRef],
    since: datetime,
    now: datetime,
) -> tuple[Lane, ...]:
    names = [w.name for w in workers]
    extra = sorted({r.worker for r in runs} - set(names))
    masters = {w.name: w.master for w in workers}
    lanes = []
    for name in [*names, *extra]:
        mine = tuple(
            sorted((r for r in runs if r.worker == name), key=lambda r: (r.start, r.issue))
        )
        seen = sorted({r.master for r in mine if r.master})
        # One worker with two masters is two supervisors and two lanes (D4's table): split it.
        groups = (
            [(m, tuple(r for r in mine if r.master == m)) for m in seen]
            if len(seen) > 1
            else [(masters.get(name) or (seen[0] if seen else ""), mine)]
        )
        for master, group in groups:
            dark = tuple(d for d in darks if d.worker == name and d.end >= since)
            lanes.append(Lane(name, master, name in masters, group, dark))
    return tuple(lanes)


def window(now: datetime, span: timedelta) -> datetime:
    return utc(now) - span


__all__ = [
    "RUNNING",
    "Band",
    "Dark",
    "Flag",
    "Lane",
    "Run",
    "Sweep",
    "Timeline",
    "WorkerRef",
    "build",
    "runs_of",
    "window",
]
