"""Oldest-wins repair (D4): a Loop on the engine; the decision is ``fleet.core.repair.repair_plan``.

One tick = probe every worker (``dispatch()``'s own probe), decide per issue which live unit to keep
(pure), and — with ``apply`` — stop the others through their own supervisor (the whole process
tree) and post one ``superseded`` marker per stopped unit, naming the kept one.

* **Under the fleet lock** (``--apply``), across the probe and every stop, so no dispatch can
  interleave a launch between what the repair saw and what it stops.
* **The superseded marker is the later word.** A stopped runner posts its own ``stopped`` marker
  on SIGTERM (D12) before it exits, and ``Supervisor.stop`` returns once the name is free, so
  posting after the stop returns puts ``superseded`` after ``stopped``. It is not a failure and it
  does not latch: while the kept unit runs, the scheduler's predicate 5 holds the issue (running).
* A unit that ended by itself between the probe and the stop posted its own terminal: it gets no
  marker, so its word stands.
* A worker the probe could not check is named in the report: a unit there is not in this decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.board.base import BoardError
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.model import Unit, WorkerView
from fleet.core.repair import ORDER, RepairDecision, repair_plan, superseded_marker, who
from fleet.inventory import WorkerConfig
from fleet.observe import probe_fleet
from fleet.roles.base import begin, drain_role
from fleet.roles.engine import Failure, IndependentItems, Result
from fleet.trace import Trace, to_jsonable
from fleet.trace.codec import decode
from fleet.trace.replay import Comparison, RecordError, compare, register
from fleet.transport import TransportError
from fleet.units import SupervisorError

# The stopped runner's grace to post its ``stopped`` marker (its close-out asks the forge and posts
# one comment: ~1 s locally) before SIGKILL; the Supervisor Protocol's own default.
STOP_GRACE_S = 20.0


def host_key(w: WorkerConfig) -> str:
    """Which kernel a worker's monotonic clock belongs to: a local worker is this box; an ssh
    worker is its host and port. Two masters on one box share the key (D4: the repair compares
    their monotonic starts); different keys fall back to the wall clock, never wrong, only coarser."""
    return "this-box" if w.transport == "local" else f"{w.host}:{w.port}"


def plan_from(views: Sequence[WorkerView], hosts: Mapping[str, str]) -> tuple[RepairDecision, ...]:
    """The decision from one probe: only units a reachable worker reported take part."""
    return repair_plan([u for v in views if v.reachable for u in v.units], hosts)


@dataclass
class RepairReport:
    """What one repair tick decided and did. ``outcome``: dry-run | repaired | nothing | failed."""

    outcome: str
    decisions: tuple[RepairDecision, ...] = ()
    stopped: list[str] = field(default_factory=list)  # "#N worker/master"
    ended: list[str] = field(default_factory=list)  # ended by itself before the stop: no marker
    failures: list[str] = field(default_factory=list)
    unchecked: tuple[str, ...] = ()
    lock_error: str | None = None
    exit: Exit = Exit.OK

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "order": ORDER,
            "exit": int(self.exit),
            "decisions": to_jsonable(self.decisions),
            "stopped": self.stopped,
            "ended": self.ended,
            "failures": self.failures,
            "unchecked": list(self.unchecked),
            "lock_error": self.lock_error,
        }


class Repairer(IndependentItems[RepairDecision]):
    """A Loop: ``select_queue`` probes and decides; ``dispatch`` stops one issue's duplicates."""

    def __init__(self, ctx: FleetContext, trace: Trace, *, apply: bool) -> None:
        self.ctx, self.trace, self.apply = ctx, trace, apply
        self.views: tuple[WorkerView, ...] = ()
        self.decisions: tuple[RepairDecision, ...] = ()
        self.stopped: list[str] = []
        self.ended: list[str] = []
        self.stop_failures: list[str] = []  # a duplicate that may still be live
        self.write_failures: list[str] = []  # stopped, but its marker did not take

    # the six methods
    def name(self) -> str:
        return "repairer"

    def select_queue(self) -> Sequence[RepairDecision]:
        self.views = probe_fleet(self.ctx)
        hosts = {w.name: host_key(w) for w in self.ctx.inventory.workers}
        self.decisions = plan_from(self.views, hosts)
        self.trace.event(
            "REPAIR",
            apply=self.apply,
            order=ORDER,
            workers=to_jsonable(self.views),
            hosts=hosts,
            decisions=to_jsonable(self.decisions),
        )
        if not self.apply:
            return ()
        return tuple(d for d in self.decisions if d.decided)

    def _one(self, item: RepairDecision) -> Result:
        lines: list[str] = []
        ok = True
        for unit in item.stop:
            line, stopped_ok = self._stop_one(item, unit)
            lines.append(line)
            ok = ok and stopped_ok
        return Result(ok, "; ".join(lines), None if ok else Failure.UNCLASSIFIED)

    def _stop_one(self, d: RepairDecision, unit: Unit) -> tuple[str, bool]:
        tag = f"#{d.issue} {who(unit)}"
        w = self.ctx.worker(unit.worker)
        if w is None:  # the probe only reports inventory workers; guarded, not expected
            self.stop_failures.append(f"{tag}: no such worker in the inventory; not stopped")
            return self.stop_failures[-1], False
        try:
            res = self.ctx.supervisor(w).stop(d.issue, timeout_s=STOP_GRACE_S)
        except (SupervisorError, TransportError) as exc:
            self.ctx.forget(w.name)
            self.stop_failures.append(f"{tag}: the stop failed ({exc}); it may still be live")
            return self.stop_failures[-1], False
        if not res.stopped:
            self.stop_failures.append(f"{tag}: the name is not free after the stop: {res.detail}")
            return self.stop_failures[-1], False
        if not res.was_live:
            self.ended.append(tag)
            return f"{tag}: had already ended (its own terminal stands; no marker)", True
        try:
            self.ctx.board.comment(d.issue, superseded_marker(d, unit))
        except BoardError as exc:
            self.write_failures.append(f"{tag}: stopped, but its superseded marker failed: {exc}")
            return self.write_failures[-1], False
        self.stopped.append(tag)
        return f"{tag}: stopped, superseded by {who(d.keep)}" if d.keep else tag, True

    def land(self, item: RepairDecision, result: Result) -> None:
        if not result.ok:
            self.ctx.warn(f"fleet: repair: {result.detail}")

    def on_idle(self) -> bool:
        return False  # one tick per call


def repair(ctx: FleetContext, *, apply: bool, trace: Trace | None = None) -> RepairReport:
    """One repair tick. A dry run decides and stops nothing."""
    hold, apply, trace = begin(ctx, "repair", apply, trace)
    repairer = Repairer(ctx, trace, apply=apply)
    lock_error = drain_role(ctx, repairer, trace, apply=apply, key=lambda d: str(d.issue))
    report = RepairReport(
        outcome="failed",
        decisions=repairer.decisions,
        stopped=repairer.stopped,
        ended=repairer.ended,
        failures=repairer.stop_failures + repairer.write_failures,
        unchecked=tuple(
            f"{v.name} ({v.reach}: {v.detail})" for v in repairer.views if not v.reachable
        ),
        lock_error=lock_error,
    )
    undecided = any(not d.decided for d in report.decisions)
    if lock_error is not None:
        report.exit = Exit.LOCK_TIMEOUT
    elif repairer.stop_failures:
        report.exit = Exit.REPAIR_STOP_FAILED
    elif repairer.write_failures:
        report.exit = Exit.WRITE_FAILED
    elif not apply:
        report.outcome = "held" if hold is not None else "dry-run"
    elif undecided:
        report.outcome, report.exit = "undecided", Exit.REPAIR_UNDECIDED
    else:
        report.outcome = "repaired" if report.stopped else "nothing"
    trace.event("REPAIR_END", outcome=report.outcome, exit=int(report.exit), stopped=report.stopped)
    return report


def _verdicts(decisions: Sequence[RepairDecision]) -> dict[tuple[int | None, str], str]:
    return {
        (d.issue, "repair"): (
            f"keep {who(d.keep)}, stop {', '.join(who(u) for u in d.stop)}: {d.why}"
            if d.keep is not None
            else d.why
        )
        for d in decisions
    }


def replay_repair(record: Mapping[str, Any]) -> Comparison:
    """A ``REPAIR`` trace line: ``repair_plan`` on the recorded probe against the recorded plan."""
    for name in ("workers", "hosts", "decisions"):
        if name not in record:
            raise RecordError(f"REPAIR has no {name!r} field")
    views = decode(tuple[WorkerView, ...], record["workers"], "workers")
    hosts = decode(dict[str, str], record["hosts"], "hosts")
    recorded = decode(tuple[RepairDecision, ...], record["decisions"], "decisions")
    return compare(_verdicts(recorded), _verdicts(plan_from(views, hosts)))


register("REPAIR", replay_repair)

__all__ = [
    "STOP_GRACE_S",
    "RepairReport",
    "Repairer",
    "host_key",
    "plan_from",
    "repair",
    "replay_repair",
]
