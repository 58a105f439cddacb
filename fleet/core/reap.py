"""The reaper's decision (D14, D20), pure: which orphaned starts to reset, and why not the others.

An item is reaped only when all three hold:

1. its last word is a **start** marker (a run announced itself and posted no terminal, D12);
2. **no live unit** for the issue on any worker — the probe is the real signal — and the worker the
   start names answered the probe without the unit. A start whose worker answered is reapable
   whatever another worker does; only a start that could be on a silent worker waits for it: one
   whose own worker is unreachable (or failed its probe), one naming a worker this fleet does not
   probe, or one naming no worker at all while some worker is silent. Those are *could-not-check*,
   never "no unit" (D20);
3. the start is older than ``Policy.reaper_threshold_s`` — the clock only protects a live run from a
   probe that blinked (D14).

Why a silent worker blocks only the starts that could be on it: the start marker names the worker
its runner ran on (the runner posts it from inside the unit), and a worker that answered the probe
without the unit has no run of it. A unit elsewhere that the markers do not show — a hand path's
duplicate (D4, D15), or a unit launched moments ago whose runner has not posted its own start yet —
posts its own start marker when it gets there, which is newer than our reaped marker and so the
last word again; the cost is one attempt, not a duplicate. Blocking every reap on one silent worker
left a whole fleet's orphans unreaped through any one worker's outage. The announcer, not the
reaper, reports a start stranded on an unreachable worker.

A reaped item gets a ``reaped`` marker: a terminal that does not latch, so the item is eligible
again, and the start before it spends one attempt (``markers.history``), so an item that keeps
losing its runner still reaches the attempt cap (D13).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from fleet.core.markers import Kind, Marker, history, open_start, render
from fleet.core.model import Snapshot, iso
from fleet.core.repair import who
from fleet.core.select import age_text


class ReapState(StrEnum):
    """A decision's state word (the dry run prints them; D20: each blocker has its own name)."""

    REAP = "reap"
    LIVE = "live"  # a live unit holds the issue: the run is going, only quiet
    TOO_YOUNG = "too-young"  # within the threshold: the clock protects a run from a blinked probe
    COULD_NOT_CHECK = "could-not-check"  # a worker that may hold the unit was not probed


@dataclass(frozen=True)
class ReapDecision:
    """One open issue whose last word is a start: reap it, or the named reason not to."""

    issue: int
    reap: bool
    state: ReapState
    why: str
    start_comment: int  # the start marker's comment id: re-checked just before the reap is posted
    start_at: datetime
    age_s: int
    run: str | None = None  # the run id and worker the start marker named
    worker: str | None = None


def reap_decisions(snap: Snapshot) -> tuple[ReapDecision, ...]:
    """Every open issue whose last word is a start, in issue order, each with its decision."""
    if snap.board_error is not None:
        return ()  # no queue, no decision: the role reports the board error (D5)
    out: list[ReapDecision] = []
    for issue in sorted((i for i in snap.issues if i.is_open), key=lambda i: i.number):
        start = open_start(history(issue, snap.policy))
        if start is not None:
            out.append(_decide(snap, issue.number, start))
    return tuple(out)


def _decide(snap: Snapshot, number: int, start: Marker) -> ReapDecision:
    threshold = snap.policy.reaper_threshold_s
    age_s = int((snap.now - start.at).total_seconds())
    run, worker = start.get("run"), start.get("worker")
    head = (
        f"start {iso(start.at)} ({age_text(max(age_s, 0))} ago) by run {run or '?'} "
        f"on {worker or 'an unnamed worker'}"
    )

    def decide(reap: bool, state: ReapState, why: str) -> ReapDecision:
        return ReapDecision(
            number, reap, state, why, start.comment_id, start.at, age_s, run, worker
        )

    live = snap.live_units(number)
    if live:
        units = ", ".join(f"{u.name} {u.state} on {who(u)}" for u in live)
        return decide(False, ReapState.LIVE, f"{head}; live unit: {units} (the run is going)")
    if age_s < threshold:
        left = age_text(threshold - max(age_s, 0))
        return decide(
            False,
            ReapState.TOO_YOUNG,
            f"{head}; younger than the reaper threshold {age_text(threshold)} ({left} to go): "
            "the clock protects a run from a probe that blinked",
        )
    probed = {w.name for w in snap.workers if w.reachable}
    blind = [] if worker in probed else _blind(snap, worker)
    if blind:
        return decide(
            False,
            ReapState.COULD_NOT_CHECK,
            f"{head}; could not check: {'; '.join(blind)} — an unprobed worker may hold the "
            "unit, and silence is not absence (D20)",
        )
    silent = [w.name for w in snap.workers if not w.reachable]
    aside = (
        f" ({', '.join(silent)} did not answer; the start names {worker}, which did)"
        if silent
        else ""
    )
    return decide(
        True,
        ReapState.REAP,
        f"{head}; no live unit on any of {len(probed)} probed worker(s){aside}, older than the "
        f"reaper threshold {age_text(threshold)}: orphaned (no close-out ever came)",
    )


def _blind(snap: Snapshot, worker: str | None) -> list[str]:
    """What keeps a start whose own worker did not answer from being judged: the silent workers
    (its own among them), or a start that names no worker, or one this fleet does not probe."""
    out = [
        f"{w.name} ({w.reach}: {w.detail or 'no detail'})" for w in snap.workers if not w.reachable
    ]
    if worker is None:
        out.append("the start names no worker")
    elif worker not in {w.name for w in snap.workers}:
        out.append(f"the start names worker {worker}, which this fleet does not probe")
    return out


def reaped_marker(d: ReapDecision) -> str:
    """The ``reaped`` marker for a decision: names the start it resets; text is defused (D14)."""
    fields = {"run": d.run, "worker": d.worker, "start": d.start_comment}
    note = (
        f"Reset by the reaper: {d.why}. The item is eligible again; this start counts as one "
        "attempt."
    )
    return render(Kind.REAPED, fields, note)


def threshold_warning(threshold_s: int, max_run_s: int, worker: str) -> str | None:
    """A unit cannot outlive its run-time limit (RuntimeMaxSec / the portable supervisor's
    ``--max-run-s``, plus the stop's kill grace), so a threshold above ``max_run_s`` only reaps
    runs that provably ended. At or below it, only the probe stands between a live run and a reap."""
    if threshold_s > max_run_s:
        return None
    return (
        f"fleet: warning: reaper threshold {threshold_s}s is not above worker {worker}'s run-time "
        f"limit {max_run_s}s; only the probe protects its long runs (keep it at 2x max_run_s)"
    )


__all__ = [
    "ReapDecision",
    "ReapState",
    "reap_decisions",
    "reaped_marker",
    "threshold_warning",
]
