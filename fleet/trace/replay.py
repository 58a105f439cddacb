"""Replay a trace: hand each recorded snapshot back to the pure decision that planned it, and name
every decision that comes out differently (seed 001 §9 "a decision is a value", §14 "read it in a
trace": a production run is a sequence of values, and a value can be examined after the fact).

What can be replayed is a registry keyed by the trace's event name. The sweeper's ``SWEEP`` (the
snapshot and the plan ``select`` made from it) is registered here; a role that records its own
snapshot and decisions registers its replayer from its own module::

    from fleet.trace.replay import Comparison, compare, register

    def _replay_reap(record):        # the JSON object of one trace line
        ...decode the snapshot with fleet.trace.codec, re-run the pure decision...
        return compare(recorded={(7, "reap"): "reset"}, now={(7, "reap"): "keep"})

    register("REAP", _replay_reap)

and :func:`load_roles` imports every ``fleet.roles`` module so those registrations run. A replayer
that finds its record malformed raises :class:`fleet.trace.codec.CodecError` or :class:`RecordError`;
:func:`replay` turns either into a :class:`fleet.trace.TraceError` naming the file and line.

Pure apart from :func:`replay_file` (reads the file) and :func:`load_roles` (imports modules).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.core.exits import Exit
from fleet.core.model import Plan
from fleet.core.select import select
from fleet.trace import TraceError, iter_trace
from fleet.trace.codec import CodecError, decode_plan, decode_snapshot


class RecordError(ValueError):
    """A replayable event's record lacks what its replayer needs (a field, a shape)."""


@dataclass(frozen=True)
class Difference:
    """One decision that came out differently. ``issue`` is None for a plan-wide decision."""

    issue: int | None
    aspect: str  # what was decided: "decision", "tombstone", "halts", "board error", "plan", ...
    recorded: str
    now: str

    def line(self) -> str:
        subject = f"#{self.issue}" if self.issue is not None else "plan"
        return f"{subject} {self.aspect}: recorded {self.recorded}; now {self.now}"


@dataclass(frozen=True)
class Comparison:
    """What one replayer found: how many decisions it compared, and those that differ."""

    decisions: int
    differences: tuple[Difference, ...] = ()


Key = tuple[int | None, str]  # (issue or None for the whole plan, aspect)
Replayer = Callable[[Mapping[str, Any]], Comparison]

ABSENT = "(no decision)"


def compare(recorded: Mapping[Key, str], now: Mapping[Key, str]) -> Comparison:
    """Decisions keyed by (issue, aspect), each rendered as the operator reads it; every key whose
    rendering differs — or that one side lacks — is a :class:`Difference`, in issue order."""
    keys = sorted(set(recorded) | set(now), key=lambda k: (k[0] is None, k[0] or 0, k[1]))
    diffs = tuple(
        Difference(
            issue, aspect, recorded.get((issue, aspect), ABSENT), now.get((issue, aspect), ABSENT)
        )
        for issue, aspect in keys
        if recorded.get((issue, aspect)) != now.get((issue, aspect))
    )
    return Comparison(len(keys), diffs)


# -- the registry --------------------------------------------------------------------------------

_REPLAYERS: dict[str, Replayer] = {}


def register(event: str, replayer: Replayer) -> Replayer:
    """Make ``event`` replayable. One replayer per event name: a second, different one is a bug
    (two roles writing the same event name), so it raises instead of silently winning."""
    known = _REPLAYERS.get(event)
    if known is not None and known is not replayer:
        raise ValueError(f"event {event!r} already has a replayer ({known.__qualname__})")
    _REPLAYERS[event] = replayer
    return replayer


def replayers() -> Mapping[str, Replayer]:
    return dict(_REPLAYERS)


def load_roles() -> tuple[str, ...]:
    """Import every ``fleet.roles`` module so the replayers they register exist. A module that will
    not import is reported (one note each), not fatal: a SWEEP still replays without the reaper."""
    import fleet.roles as roles

    notes = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(roles.__path__)):
        try:
            importlib.import_module(f"fleet.roles.{mod}")
        except Exception as exc:  # any import failure of a role is a note, never replay's crash
            notes.append(f"fleet.roles.{mod} did not import ({type(exc).__name__}: {exc})")
    return tuple(notes)


# -- the sweeper's decision ----------------------------------------------------------------------


def plan_decisions(plan: Plan) -> dict[Key, str]:
    """A plan as per-issue decisions in the operator's words (the fleet-status vocabulary). An
    issue decided twice in one plan renders as both decisions joined, so it never compares equal
    to a plan that decided it once (seed 001 §13: one decision per issue per plan)."""
    out: dict[Key, str] = {}

    def put(key: Key, text: str) -> None:
        out[key] = f"{out[key]} AND {text}" if key in out else text

    for d in plan.dispatch:
        put((d.issue, "decision"), f"dispatch to {d.worker} ({d.why})")
    for w in plan.waiting:
        put((w.issue, "decision"), f"{w.state} (p{w.predicate}): {w.reason}")
    for n in plan.tombstones:
        put((n, "tombstone"), "tombstone")
    for h in plan.halts:
        since = h.since.isoformat() if h.since else "unknown"
        put((None, "halts"), f"{h.source} {h.where} by {h.author} since {since}: {h.reason}")
    if plan.board_error is not None:
        put((None, "board error"), plan.board_error)
    return out


def _field(record: Mapping[str, Any], name: str) -> Any:
    if name not in record:
        raise RecordError(f"{record.get('event')} has no {name!r} field")
    return record[name]


def replay_sweep(record: Mapping[str, Any]) -> Comparison:
    """A ``SWEEP``: ``select(snapshot)`` against the recorded plan, decision by decision."""
    snap = decode_snapshot(_field(record, "snapshot"))
    recorded = decode_plan(_field(record, "plan"))
    now = select(snap)
    result = compare(plan_decisions(recorded), plan_decisions(now))
    if not result.differences and now != recorded:
        # Every decision agrees, yet the values differ: the order the dispatches go out in (the
        # sweeper launches in plan order), or a field no rendering shows. Still a difference.
        order = [f"#{d.issue}" for d in recorded.dispatch], [f"#{d.issue}" for d in now.dispatch]
        if order[0] != order[1]:
            diff = Difference(None, "dispatch order", ", ".join(order[0]), ", ".join(order[1]))
        else:
            diff = Difference(None, "plan", repr(recorded), repr(now))
        result = Comparison(result.decisions, (diff,))
    return result


register("SWEEP", replay_sweep)


# -- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Replayed:
    """One replayed trace line."""

    line: int
    event: str
    at: str | None
    comparison: Comparison

    @property
    def reproduced(self) -> bool:
        return not self.comparison.differences


@dataclass(frozen=True)
class ReplayReport:
    source: str
    records: int  # every record read, replayable or not
    replayed: tuple[Replayed, ...]
    skipped: tuple[tuple[str, int], ...] = ()  # events with no replayer, and how many of each
    notes: tuple[str, ...] = field(default=())

    @property
    def differing(self) -> tuple[Replayed, ...]:
        return tuple(r for r in self.replayed if not r.reproduced)

    def exit(self) -> Exit:
        if not self.replayed:
            return Exit.NOTHING_TO_REPLAY
        return Exit.REPLAY_DIFFERS if self.differing else Exit.OK

    def summary(self) -> str:
        skipped = ", ".join(f"{name}×{n}" for name, n in self.skipped)
        tail = f"; not replayable: {skipped}" if skipped else ""
        if not self.replayed:
            return (
                f"replay {self.source}: no replayable event in {self.records} record(s) "
                f"(replayable: {', '.join(sorted(replayers())) or 'none'}){tail}"
            )
        n, bad = len(self.replayed), len(self.differing)
        return (
            f"replay {self.source}: {n} event(s) replayed, {n - bad} reproduced, {bad} differ{tail}"
        )

    def lines(self) -> list[str]:
        """The summary, then every differing event and its differences."""
        out = [self.summary(), *(f"note: {n}" for n in self.notes)]
        for r in self.differing:
            c = r.comparison
            out.append(
                f"line {r.line} {r.event} at {r.at}: {len(c.differences)} of {c.decisions} "
                "decision(s) differ"
            )
            out += [f"  {d.line()}" for d in c.differences]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "records": self.records,
            "exit": int(self.exit()),
            "summary": self.summary(),
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
            "replayed": [
                {
                    "line": r.line,
                    "event": r.event,
                    "at": r.at,
                    "decisions": r.comparison.decisions,
                    "differences": [d.__dict__ for d in r.comparison.differences],
                }
                for r in self.replayed
            ],
        }


def replay(
    events: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    source: str = "<trace>",
    notes: tuple[str, ...] = (),
) -> ReplayReport:
    """Replay numbered trace records (line, record). A record that is not an event, or whose
    replayable content does not decode, is a :class:`TraceError` naming ``source`` and the line."""
    done: list[Replayed] = []
    skipped: Counter[str] = Counter()
    records = 0
    for line, record in events:
        records += 1
        name = record.get("event")
        if not isinstance(name, str) or not name:
            raise TraceError(source, line, "a trace record without an 'event' name")
        replayer = _REPLAYERS.get(name)
        if replayer is None:
            skipped[name] += 1
            continue
        try:
            comparison = replayer(record)
        except (CodecError, RecordError) as exc:
            raise TraceError(source, line, f"{name}: {exc}") from None
        at = record.get("at")
        done.append(Replayed(line, name, at if isinstance(at, str) else None, comparison))
    return ReplayReport(source, records, tuple(done), tuple(sorted(skipped.items())), notes)


def replay_file(path: Path, *, notes: tuple[str, ...] = ()) -> ReplayReport:
    """Read and replay a trace file; a missing file or malformed line is a :class:`TraceError`."""
    return replay(iter_trace(path), source=str(path), notes=notes)
