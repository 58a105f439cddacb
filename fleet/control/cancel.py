"""``cancel(issue)``: stop the unit wherever it runs, then post the cancelled marker — no retry, no
recovery (seed 001 §10–§11: "a cancel is decided always, even while paused").

Decided always: no kill switch, PAUSE or DRAIN is consulted — those hold new work, and a cancel
is the one decision a hold still takes.

Order matters, because eligibility reads the **last** marker (D6):

1. under the fleet lock (D4), probe every worker and stop every live ``task-N`` — the supervisor's
   stop takes the unit's whole process tree and returns once the name is free. The lock keeps a
   dispatcher from probing, seeing no unit, and launching between our probe and our stop;
2. the runner answers the stop's SIGTERM with its own ``stopped`` marker (D12), which is not a
   latch; so the ``cancelled`` marker is posted only **after** every stop has returned, still under
   the lock, and is the issue's last word: predicate 6 keeps it off the queue until a human reopens
   or releases it.

A worker that cannot be probed is could-not-check, never "no unit" (D20): the marker is still
posted (the operator's decision stands), the worker is named, and the exit code says the unit may
still be live there. A cancel of an issue with no live unit anywhere still posts the marker, so a
parked retry or a stopped run is not dispatched again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fleet.board.base import BoardError, BoardUnreadable
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.idle import place
from fleet.core.markers import Kind, history, render
from fleet.core.model import Issue, unit_name
from fleet.dispatch import fleet_lock
from fleet.lock import LockTimeout
from fleet.observe import probe_fleet
from fleet.trace import Trace
from fleet.transport import TransportError
from fleet.units import SupervisorError

# SIGTERM-to-SIGKILL grace for each stop: the runner needs it to stop its agent and post its
# ``stopped`` marker; the supervisor's own default (Supervisor.stop), for the same reason.
STOP_GRACE_S = 20.0


@dataclass(frozen=True)
class Stopped:
    worker: str
    master: str
    stopped: bool  # the name is free now
    detail: str


@dataclass(frozen=True)
class CancelReport:
    issue: int
    code: Exit
    stops: tuple[Stopped, ...] = ()
    unchecked: tuple[str, ...] = ()  # "w2: unreachable: ..." — the unit may still be live there
    posted: bool = False
    already: bool = False  # the last word was already a cancel and nothing was live: not re-posted
    note: str = ""  # why nothing was done, or why the marker is missing

    def lines(self) -> list[str]:
        """What the operator reads, one fact a line."""
        n = self.issue
        out = [
            f"#{n}: stopped {unit_name(n)} on {place(s.worker, s.master)}: {s.detail}"
            if s.stopped
            else f"#{n}: {unit_name(n)} on {place(s.worker, s.master)} did NOT stop: {s.detail}"
            for s in self.stops
        ]
        if not self.stops and self.code not in (Exit.LOCK_TIMEOUT, Exit.ISSUE_MISSING):
            where = "on any reachable worker" if self.unchecked else "anywhere"
            out.append(f"#{n}: no live unit {where}")
        out += [
            f"#{n}: could not check worker {u}; {unit_name(n)} may still be live there"
            for u in (self.unchecked)
        ]
        if self.posted:
            out.append(
                f"#{n}: cancelled marker posted: no retry, no recovery "
                "(reopen it, or comment a line starting with fleet:release, to run it again)"
            )
        elif self.already:
            out.append(f"#{n}: already cancelled (the last marker is a cancel); nothing posted")
        if self.note:
            out.append(f"#{n}: {self.note}")
        if self.code is Exit.CANCEL_UNCHECKED:
            out.append(f"#{n}: run cancel again once those workers answer")
        if self.code is Exit.CANCEL_NOT_STOPPED:
            out.append(f"#{n}: a unit did not stop; its runner may still post after the cancel")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "issue": self.issue,
            "code": int(self.code),
            "stops": [s.__dict__ for s in self.stops],
            "unchecked": list(self.unchecked),
            "posted": self.posted,
            "already": self.already,
            "note": self.note,
        }


def _read(ctx: FleetContext, issue: int) -> tuple[Issue | None, str | None]:
    try:
        return ctx.board.issue(issue), None
    except BoardUnreadable as exc:
        return None, str(exc)


def _stop_everywhere(
    ctx: FleetContext, issue: int, grace_s: float
) -> tuple[list[Stopped], list[str]]:
    stops: list[Stopped] = []
    unchecked: list[str] = []
    for view in probe_fleet(ctx):
        if not view.reachable:
            unchecked.append(f"{view.name}: {view.reach.value}: {view.detail}")
            continue
        live = [u for u in view.units if u.issue == issue and u.live]
        if not live:
            continue
        w = ctx.worker(view.name)
        assert w is not None  # probe_fleet probes the inventory's workers
        try:
            res = ctx.supervisor(w).stop(issue, timeout_s=grace_s)
        except (SupervisorError, TransportError) as exc:
            ctx.forget(w.name)
            stops.append(Stopped(view.name, live[0].master, False, f"stop failed: {exc}"))
            continue
        stops.append(Stopped(view.name, live[0].master, res.stopped, res.detail))
    return stops, unchecked


def _marker(author: str, reason: str | None, stops: list[Stopped], unchecked: list[str]) -> str:
    where = ",".join(place(s.worker, s.master) for s in stops) or None
    fields = {
        "by": author,
        "stopped": where,
        "unchecked": ",".join(u.split(":", 1)[0] for u in unchecked) or None,
    }
    note = f"Cancelled by {author}: {reason}" if reason else f"Cancelled by {author}."
    note += (
        "\n\nNo retry, no recovery: fleet will not dispatch this issue again until a human "
        "reopens it or comments a line starting with the release token."
    )
    return render(Kind.CANCELLED, fields, note)


def outcome_code(marked: bool, stops: list[Stopped], unchecked: list[str]) -> Exit:
    """One code per way a cancel can fall short, worst first (D20): no marker at all (the issue
    may be dispatched again), a unit that did not stop, a worker nobody could check."""
    if not marked:
        return Exit.WRITE_FAILED
    if any(not s.stopped for s in stops):
        return Exit.CANCEL_NOT_STOPPED
    if unchecked:
        return Exit.CANCEL_UNCHECKED
    return Exit.OK


def cancel(
    ctx: FleetContext,
    issue: int,
    *,
    author: str,
    reason: str | None = None,
    grace_s: float = STOP_GRACE_S,
) -> CancelReport:
    """Stop ``task-<issue>`` on every worker, then post the cancelled marker as the last word."""
    the, unreadable = _read(ctx, issue)
    if the is None and unreadable is None:
        return CancelReport(issue, Exit.ISSUE_MISSING, note=f"issue #{issue} does not exist")
    trace = Trace(Path(ctx.inventory.state_dir) / "trace.jsonl")
    try:
        with fleet_lock(ctx):
            stops, unchecked = _stop_everywhere(ctx, issue, grace_s)
            posted, already, note = _post(ctx, issue, the, author, reason, stops, unchecked)
    except LockTimeout as exc:
        return CancelReport(
            issue, Exit.LOCK_TIMEOUT, note=f"nothing stopped, nothing posted: {exc}; run it again"
        )
    code = outcome_code(posted or already, stops, unchecked)
    report = CancelReport(issue, code, tuple(stops), tuple(unchecked), posted, already, note)
    trace.event("CANCEL", author=author, reason=reason, **report.to_json())
    return report


def _post(
    ctx: FleetContext,
    issue: int,
    the: Issue | None,
    author: str,
    reason: str | None,
    stops: list[Stopped],
    unchecked: list[str],
) -> tuple[bool, bool, str]:
    """(posted, already cancelled, note). Re-read after the stops: the runner has just written."""
    try:
        fresh = ctx.board.issue(issue) or the
    except BoardUnreadable:
        fresh = the
    if fresh is not None and not stops and not unchecked:
        last = history(fresh, ctx.inventory.policy).last_marker
        if last is not None and last.kind is Kind.CANCELLED:
            return False, True, ""
    try:
        ctx.board.comment(issue, _marker(author, reason, stops, unchecked))
    except BoardError as exc:
        return False, False, f"the cancelled marker was NOT posted ({exc}); run cancel again"
    return True, False, ""
