"""What the sweeper's trace says over time: its ticks, the switches it saw, the workers it found dark.

Pure: the trace records in, values out. A ``TICK`` record (written at the end of every sweep,
``fleet.roles.sweeper``) carries the outcome, what was launched and refused, and the PAUSE/DRAIN
switches; a ``SWEEP`` record carries the snapshot the sweep planned from, whose workers and halts
give the capacity-dark periods and the halt bands. A trace written before ``TICK`` existed still
draws: its sweeps come from ``SWEEP`` and the engine's ``LAND`` records, without outcome or holds.

A period (dark, halt, pause, drain) is the run of consecutive sweeps that saw it: it starts at the
first (or at the switch's own ``since`` when that is earlier) and ends at the first sweep that saw it
gone. One still seen by the last sweep is ``ongoing`` and drawn to now. A worker a sweep could not
reach says nothing about its capacity: it neither opens nor closes a dark period (D20).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from fleet.core.model import parse_iso, utc


@dataclass(frozen=True)
class Refusal:
    issue: int
    code: int
    reason: str


@dataclass(frozen=True)
class Sweep:
    at: datetime
    outcome: str  # the TickReport outcome; "" for a trace from before TICK records
    launched: tuple[tuple[int, str], ...]  # (issue, worker)
    refused: tuple[Refusal, ...]
    summary: str


@dataclass(frozen=True)
class Band:
    """A fleet-wide hold drawn across every lane."""

    kind: str  # "halt" | "pause" | "drain" | "board-unreadable"
    label: str
    start: datetime
    end: datetime
    ongoing: bool


@dataclass(frozen=True)
class Dark:
    """A period in which a worker accepted no work: a provider limit or a revoked credential (D8)."""

    worker: str
    source: str  # "rate_limit" | "revoked"
    reset: str  # the stated reset (ISO), or "unknown": never fabricated
    evidence: str
    start: datetime
    end: datetime
    ongoing: bool


class _Run(Protocol):  # the fields of fleet.timeline.model.Run (frozen) that dark periods read
    @property
    def worker(self) -> str: ...
    @property
    def start(self) -> datetime: ...
    @property
    def end(self) -> datetime | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def dark_source(self) -> str | None: ...
    @property
    def dark_reset(self) -> str | None: ...


def _at(record: Mapping[str, Any]) -> datetime | None:
    try:
        return parse_iso(str(record.get("at")))
    except (ValueError, OverflowError):
        return None


def _timed(
    trace: Iterable[Mapping[str, Any]], kind: str
) -> list[tuple[datetime, Mapping[str, Any]]]:
    out = [(at, r) for r in trace if r.get("event") == kind and (at := _at(r)) is not None]
    return sorted(out, key=lambda t: t[0])


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _from_tick(at: datetime, r: Mapping[str, Any]) -> Sweep:
    launched = tuple(
        (n, str(x.get("worker") or "?"))
        for x in r.get("launched") or ()
        if isinstance(x, Mapping) and (n := _int(x.get("issue"))) is not None
    )
    refused = tuple(
        Refusal(n, _int(x.get("code")) or 0, str(x.get("reason") or ""))
        for x in r.get("refused") or ()
        if isinstance(x, Mapping) and (n := _int(x.get("issue"))) is not None
    )
    return Sweep(at, str(r.get("outcome") or ""), launched, refused, str(r.get("summary") or ""))


def sweeps_of(trace: Sequence[Mapping[str, Any]]) -> tuple[Sweep, ...]:
    """Every ``--apply`` sweep: from TICK records, or from SWEEP + LAND in an older trace."""
    ticks = _timed(trace, "TICK")
    if ticks:
        return tuple(_from_tick(at, r) for at, r in ticks if r.get("apply", True))
    out: list[Sweep] = []
    current: Sweep | None = None
    for r in trace:
        at = _at(r)
        if at is None:
            continue
        if r.get("event") == "SWEEP" and r.get("apply"):
            if current is not None:
                out.append(current)
            current = Sweep(at, "", (), (), str(r.get("summary") or ""))
        elif r.get("event") == "LAND" and r.get("loop") == "sweeper" and current is not None:
            n = _int(r.get("item"))
            if n is None:
                continue
            if r.get("ok"):
                current = Sweep(
                    current.at, "", (*current.launched, (n, "?")), current.refused, current.summary
                )
            else:
                refusal = Refusal(n, 0, str(r.get("detail") or ""))
                current = Sweep(
                    current.at, "", current.launched, (*current.refused, refusal), current.summary
                )
    if current is not None:
        out.append(current)
    return tuple(out)


# -- periods -----------------------------------------------------------------------------------


def _periods(
    seen: Sequence[tuple[datetime, set[tuple[str, ...]] | None]],
    now: datetime,
    since: Mapping[tuple[str, ...], datetime] | None = None,
) -> list[tuple[tuple[str, ...], datetime, datetime, bool]]:
    """Runs of consecutive observations holding the same key. ``None`` observes nothing."""
    open_: dict[tuple[str, ...], datetime] = {}
    out = []
    for at, keys in seen:
        if keys is None:
            continue
        for k in list(open_):
            if k not in keys:
                out.append((k, open_.pop(k), at, False))
        for k in keys:
            if k not in open_:
                first = (since or {}).get(k)
                open_[k] = min(at, first) if first is not None else at
    out += [(k, start, max(now, start), True) for k, start in open_.items()]
    return sorted(out, key=lambda t: (t[1], t[0]))


def _switch(r: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    s = (r.get("switches") or {}).get(name) if isinstance(r.get("switches"), Mapping) else None
    return s if isinstance(s, Mapping) else None


def _halt_keys(halts: object, since: dict[tuple[str, ...], datetime]) -> set[tuple[str, ...]]:
    keys: set[tuple[str, ...]] = set()
    for h in halts if isinstance(halts, list) else ():
        if not isinstance(h, Mapping):
            continue
        who = f" by {h['author']}" if h.get("author") else ""
        why = h.get("reason") or "no reason was recorded"
        key = ("halt", f"halt ({h.get('source')} {h.get('where') or ''}){who}: {why}")
        keys.add(key)
        try:
            t = parse_iso(h.get("since"))
        except (ValueError, OverflowError):
            t = None
        if t is not None:
            since[key] = min(since.get(key, t), t)
    return keys


def _hold_keys(r: Mapping[str, Any]) -> set[tuple[str, ...]]:
    keys: set[tuple[str, ...]] = set()
    for name in ("pause", "drain"):
        s = _switch(r, name)
        if s is not None:
            who = f" by {s['author']}" if s.get("author") else ""
            why = s.get("reason") or "no reason was recorded"
            keys.add((name, f"{name.upper()}{who}: {why}"))
    if r.get("outcome") == "failed":
        keys.add(
            ("board-unreadable", f"board unreadable: {r.get('error') or r.get('summary') or ''}")
        )
    return keys


def _snapshot_halts(r: Mapping[str, Any]) -> object:
    snap = r.get("snapshot")
    return snap.get("halts") if isinstance(snap, Mapping) else None


def bands_of(trace: Sequence[Mapping[str, Any]], now: datetime) -> tuple[Band, ...]:
    """Halts, pauses, drains and unreadable-board spells, from the TICK records (a halted tick
    reads no board, so its halt is only there); a trace from before TICK records draws its halts
    from the SWEEP snapshots."""
    since: dict[tuple[str, ...], datetime] = {}
    ticks = [(at, r) for at, r in _timed(trace, "TICK") if r.get("apply", True)]
    if ticks:
        halts = [(at, _halt_keys(r.get("halts"), since)) for at, r in ticks]
    else:
        halts = [(at, _halt_keys(_snapshot_halts(r), since)) for at, r in _timed(trace, "SWEEP")]
    holds = [(at, _hold_keys(r)) for at, r in ticks]
    periods = _periods(halts, now, since) + _periods(holds, now)
    return tuple(
        Band(k[0], k[1], start, end, ongoing)
        for k, start, end, ongoing in sorted(periods, key=lambda t: (t[1], t[0]))
    )


def _worker_seen(snap: Mapping[str, Any]) -> dict[str, tuple[str, ...] | bool | None]:
    """Per worker: its dark key, False (seen healthy) or None (could not be checked)."""
    out: dict[str, tuple[str, ...] | bool | None] = {}
    for w in snap.get("workers") or ():
        if not isinstance(w, Mapping) or not w.get("name"):
            continue
        cap = w.get("capacity")
        if w.get("reach") not in (None, "ok"):
            out[str(w["name"])] = None
        elif isinstance(cap, Mapping):
            out[str(w["name"])] = (
                str(cap.get("source")),
                str(cap.get("reset_at") or "unknown"),
                str(cap.get("evidence") or ""),
            )
        else:
            out[str(w["name"])] = False
    return out


def darks_of(
    trace: Sequence[Mapping[str, Any]], runs: Iterable[_Run], now: datetime
) -> tuple[Dark, ...]:
    """Capacity-dark periods per worker, from capacity terminals, later starts and the sweeps.

    A capacity terminal opens a period on its run's worker (board clock); a sweep that found the
    worker dark opens or continues one; a later start on the worker, or a sweep that found it
    reachable and not dark, closes it. A period open at the end is drawn to now.
    """
    obs: dict[str, list[tuple[datetime, int, tuple[str, ...] | bool]]] = {}
    for at, r in _timed(trace, "SWEEP"):
        snap = r.get("snapshot")
        for name, state in _worker_seen(snap if isinstance(snap, Mapping) else {}).items():
            if state is not None:
                obs.setdefault(name, []).append((at, 1, state))
    for run in runs:
        obs.setdefault(run.worker, []).append((utc(run.start), 0, False))
        if run.outcome == "capacity" and run.end is not None:
            key = (run.dark_source or "rate_limit", run.dark_reset or "unknown", "capacity marker")
            obs[run.worker].append((utc(run.end), 2, key))
    out: list[Dark] = []
    for worker, seen in sorted(obs.items()):
        out += _worker_darks(worker, sorted(seen, key=lambda t: (t[0], t[1])), now)
    return tuple(out)


def _worker_darks(
    worker: str, seen: Sequence[tuple[datetime, int, tuple[str, ...] | bool]], now: datetime
) -> list[Dark]:
    out: list[Dark] = []
    cur: tuple[datetime, tuple[str, ...]] | None = None
    for at, _order, state in seen:
        if state is False:
            if cur is not None:
                out.append(_dark(worker, cur, at, False))
                cur = None
            continue
        assert isinstance(state, tuple)
        if cur is None:
            cur = (at, state)
        elif cur[1][:2] != state[:2]:
            # A sweep's reading (reset as the file states it) refines the marker's: same period.
            if cur[1][2] == "capacity marker" and state[0] == cur[1][0]:
                cur = (cur[0], state)
            else:
                out.append(_dark(worker, cur, at, False))
                cur = (at, state)
        elif cur[1][2] == "capacity marker":
            cur = (cur[0], state)
    if cur is not None:
        out.append(_dark(worker, cur, max(now, cur[0]), True))
    return out


def _dark(worker: str, cur: tuple[datetime, tuple[str, ...]], end: datetime, ongoing: bool) -> Dark:
    start, (source, reset, evidence) = cur
    return Dark(worker, source, reset, evidence, start, end, ongoing)
