"""The sweeper: the scheduler as the first Loop on the engine (seed 000, seed 003 "scheduler").

One tick = observe (one board read, one fleet probe) → ``select`` (pure) → the plan's items handed
to the one dispatch path (``dispatch_batch``, D15), a round of claimed items at a time → a heartbeat
on every exit path (D14): dispatched, idle, halted, failed — so "nothing to do" and "not running"
never look the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from fleet.board.base import BoardPage
from fleet.context import FleetContext
from fleet.control.switches import Switch, Switches, read_halt_file, read_switches
from fleet.core import cost
from fleet.core.exits import Exit
from fleet.core.model import Dispatch, Plan, Snapshot, iso
from fleet.core.select import halt_line, issue_halts, select
from fleet.dispatch import DispatchResult, Request, dispatch_batch
from fleet.observe import read_page, snapshot
from fleet.roles.announcer import tell_a_human
from fleet.roles.engine import Failure, FileClaims, Result, Tier, drain
from fleet.trace import Trace, to_jsonable

# Items the engine hands the dispatch path at once, per worker of the inventory (the pool, D13: it
# bounds dispatches, never runs). One round's items share one batch's probes and syncs and one hold
# of the fleet lock, and each worker's claims of the batch travel as one remote command, the
# workers side by side; so a hold grows with the claims per worker, not with the workers. Measured
# on the harness, 200 launches over 5 masters sharing one 2-core box at load 8: batches of 64
# (13 a master) -> 14.6 launches/s, 49 ms of worker CPU per launch, the lock held 1.7 s a batch;
# one batch of 200 (40 a master) -> 21.5 launches/s, 30 ms per launch, held 5.9 s. 40 a worker
# keeps a hold well inside the 30 s a waiting dispatcher allows (lock.wait_s) even there; on
# workers of their own a claim is ~26 ms of wall, ~1 s for 40.
SWEEP_CLAIMS_PER_WORKER = 40


def sweep_pool(workers: int) -> int:
    """The engine's pool for a fleet of ``workers`` workers."""
    return SWEEP_CLAIMS_PER_WORKER * max(1, workers)


# The three failure classes of seed 000, acted on by the engine (fleet/roles/engine.py): retry-class
# refusals clear by themselves within seconds, so the engine dispatches them again on its ladder
# (RETRY_BACKOFFS_S) within this tick; refusals are the mechanism working and are never retried;
# any other code is cannot-classify and goes to a human through the announcer (tell_a_human).
_RETRYABLE = {Exit.LOCK_TIMEOUT, Exit.HELD_FINISHED, Exit.UNREACHABLE, Exit.CLONE_UNSYNCED}
# Refusals that are the mechanism working (a guard said no on positive evidence).
_REFUSALS = {
    Exit.HALTED_FILE,
    Exit.HALTED_ISSUE,
    Exit.PAUSED,
    Exit.DRAINING,
    Exit.ISSUE_MISSING,
    Exit.ISSUE_CLOSED,
    Exit.DO_NOT_DISPATCH,
    Exit.DARK_RATE_LIMIT,
    Exit.DARK_REVOKED,
    Exit.BLOCKED,
    Exit.CI_RED,
    Exit.NO_PERMISSION,
    Exit.NO_RUNNER,
    Exit.HELD_LIVE,
    Exit.HELD_OTHER_WORKER,
    Exit.LATCHED_UNDER_LOCK,
    Exit.NO_SUCH_WORKER,
    Exit.ALL_DARK,
    Exit.NONE_REACHABLE,
}


def classify(r: DispatchResult) -> Failure | None:
    if r.launched:
        return None
    if r.code in _RETRYABLE:
        return Failure.RETRY
    if r.code in _REFUSALS:
        return Failure.REFUSE
    return Failure.UNCLASSIFIED


class TickOutcome(StrEnum):
    """How one tick ended: the heartbeat's and the TICK record's ``outcome`` (fleet-status reads it)."""

    DISPATCHED = "dispatched"
    IDLE = "idle"
    HALTED = "halted"
    PAUSED = "paused"
    DRAINING = "draining"
    FAILED = "failed"
    CRASHED = "crashed"
    DRY_RUN = "dry-run"


@dataclass
class TickReport:
    outcome: TickOutcome
    plan: Plan
    results: list[DispatchResult] = field(default_factory=list)
    exit: Exit = Exit.OK
    error: str = ""  # a crashed sweep's exception, in one line
    retried: int = 0  # re-dispatches of retry-class refusals within this tick (seed 000)
    unclassified: list[int] = field(default_factory=list)  # issues whose failure went to a human
    page: BoardPage | None = None  # the one board read of this tick (the timeline draws from it)

    def counts(self) -> dict[str, int]:
        launched = sum(1 for r in self.results if r.launched)
        return {
            "planned": len(self.plan.dispatch),
            "launched": launched,
            "refused": len(self.results) - launched,
            "waiting": len(self.plan.waiting),
            "retried": self.retried,
            "unclassified": len(self.unclassified),
        }


class Sweeper:
    """A Loop: select_queue observes and plans; dispatch goes through ``dispatch()``."""

    def __init__(self, ctx: FleetContext, trace: Trace, *, apply: bool) -> None:
        self.ctx, self.trace, self.apply = ctx, trace, apply
        self.page: BoardPage | None = None
        self.snap: Snapshot | None = None
        self.plan: Plan = Plan()
        self._results: dict[int, DispatchResult] = {}  # the latest attempt per issue

    @property
    def results(self) -> list[DispatchResult]:
        """One result per dispatched issue: its last attempt (the engine may retry one)."""
        return list(self._results.values())

    # the six methods
    def name(self) -> str:
        return "sweeper"

    def select_queue(self) -> Sequence[Dispatch]:
        self.page, error = read_page(self.ctx)
        if self.page is not None:  # every cycle's read is priced (D1): fleet-status --cost
            Trace(Path(self.ctx.inventory.state_dir) / cost.LOG_NAME).event(
                cost.EVENT,
                cost=self.page.cost,
                cost_unit=self.page.cost_unit,
                skipped=len(self.page.skipped),  # items the read could not see (GitHub)
            )
        if self.apply and self.page is not None:
            # The second kill switch, out of the page just read and before any worker is probed
            # (seed 003: both switches before anything else reaches the network).
            halts = issue_halts(self.page.issues, self.ctx.inventory.policy)
            if halts:
                self.plan = Plan(halts=halts)
                now = self.ctx.clock()
                self.trace.event("HALTED", lines=[halt_line(h, now) for h in halts])
                return ()
        snap = snapshot(self.ctx, page=self.page) if self.page is not None else None
        if snap is None:
            snap = Snapshot(
                now=self.ctx.clock(),
                issues=(),
                workers=(),
                policy=self.ctx.inventory.policy,
                board_error=error,
            )
        self.snap = snap
        self.plan = select(snap)
        self.trace.event(
            "SWEEP",
            apply=self.apply,
            summary=self.plan.summary(),
            snapshot=to_jsonable(snap),
            plan=to_jsonable(self.plan),
        )
        if not self.apply or self.plan.board_error or self.plan.halts:
            return ()
        return self.plan.dispatch

    def tier_policy(self, item: Dispatch) -> Tier:
        return Tier.DISPATCH  # holds never reach the queue: select() named them already

    def dispatch(self, items: Sequence[Dispatch]) -> list[Result]:
        requests = [Request(item.issue, item.worker) for item in items]
        out = []
        for r in dispatch_batch(self.ctx, requests, page=self.page):
            self._results[r.issue] = r
            detail = r.line() if r.launched else f"{r.line()} (exit {int(r.code)} {r.code.name})"
            out.append(Result(r.launched, detail, classify(r), r.to_json()))
        return out

    def land(self, item: Dispatch, result: Result) -> None:
        if not result.ok:
            self.ctx.warn(result.detail)

    def on_idle(self) -> bool:
        return False  # one tick per call; the timer is the loop


HEARTBEAT = (
    "heartbeat.json"  # the timer's sweeps (--apply): what fleet-status and the announcer read
)
# A hand-run dry run writes its own file: refreshing the timer's heartbeat from a terminal would
# hide a stopped timer for two periods, the very outage the heartbeat exists to show (D14).
DRY_RUN_HEARTBEAT = "heartbeat.dry-run.json"


def write_heartbeat(state_dir: Path, report: TickReport, now: datetime, *, apply: bool) -> Path:
    """Written on every exit path, atomically; fleet-status shows its age and outcome."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / (HEARTBEAT if apply else DRY_RUN_HEARTBEAT)
    tmp = path.with_name(f".heartbeat.{os.getpid()}")
    tmp.write_text(
        json.dumps(
            {
                "at": iso(now),
                "outcome": report.outcome,
                "counts": report.counts(),
                "exit": int(report.exit),
                "summary": report.plan.summary(),
                **({"error": report.error} if report.error else {}),
            }
        )
        + "\n",
        encoding="utf-8",
    )
    os.replace(tmp, path)
    return path


def _switch_record(s: Switch | None) -> dict[str, object] | None:
    if s is None:
        return None
    return {"reason": s.reason, "author": s.author, "since": iso(s.since)}


def tick_record(report: TickReport, switches: Switches, *, apply: bool) -> dict[str, object]:
    """The trace's record of one tick's end: what the timeline draws for a sweep (its outcome,
    what it launched and refused) and the holds it obeyed, which the SWEEP record cannot know."""
    return {
        "apply": apply,
        "outcome": report.outcome,
        "exit": int(report.exit),
        "summary": report.plan.summary(),
        "counts": report.counts(),
        "launched": [
            {"issue": r.issue, "worker": r.worker, "run_id": r.run_id}
            for r in report.results
            if r.launched
        ],
        "refused": [
            {"issue": r.issue, "code": int(r.code), "reason": r.line()}
            for r in report.results
            if not r.launched
        ],
        "halts": to_jsonable(report.plan.halts),
        "switches": {
            "pause": _switch_record(switches.pause),
            "drain": _switch_record(switches.drain),
        },
        **(
            {"error": report.error or report.plan.board_error}
            if report.outcome in (TickOutcome.FAILED, TickOutcome.CRASHED)
            else {}
        ),
    }


def switched_off(ctx: FleetContext, switches: Switches, trace: Trace) -> TickReport | None:
    """The file switches, read before anything reaches the network (seed 003): the halt file
    dispatches nothing, a pause decides only cancels (seed 001 §10), a drain starts nothing new.
    None of them needs the board or a worker, so a held tick reads neither — no board read, no
    probe, no notifier installed on a worker. A dry run (a human asking why) still observes."""
    now = ctx.clock()
    if switches.halt_file is not None:
        halt = read_halt_file(Path(ctx.inventory.halt.file), now)
        if halt is not None:  # None: removed between the two reads, not halted any more
            trace.event("HALTED", lines=[halt_line(halt, now)])
            return TickReport(TickOutcome.HALTED, Plan(halts=(halt,)))
    held = ((TickOutcome.PAUSED, switches.pause), (TickOutcome.DRAINING, switches.drain))
    for outcome, switch in held:
        if switch is not None:
            line = (
                f"fleet: sweep held by the {switch.name} "
                f"({switch.reason or 'no reason was recorded'}): nothing read, nothing dispatched"
            )
            ctx.warn(line)
            trace.event("HELD", outcome=outcome, line=line)
            return TickReport(outcome, Plan())
    return None


def tick(ctx: FleetContext, *, apply: bool, trace: Trace | None = None) -> TickReport:
    """One sweep; the heartbeat is written whatever happens (D14)."""
    state = Path(ctx.inventory.state_dir)
    trace = trace or Trace(state / "trace.jsonl")
    sweeper = Sweeper(ctx, trace, apply=apply)
    switches = read_switches(ctx.inventory)  # local files: read before anything else
    report = TickReport(TickOutcome.CRASHED, Plan(), exit=Exit.SWEEP_CRASHED)
    try:
        switched = switched_off(ctx, switches, trace) if apply else None
        if switched is not None:
            report = switched
            return report
        claims = FileClaims(state / "claims")
        escalate = tell_a_human(ctx, trace) if apply else None  # a held tick returned above
        try:
            drained = drain(
                sweeper,
                claims,
                trace,
                pool=sweep_pool(len(ctx.inventory.workers)),
                key=lambda d: str(d.issue),
                escalate=escalate,
            )
        except Exception as exc:  # named in the heartbeat, then raised: a traceback is a bug
            report = TickReport(
                TickOutcome.CRASHED, sweeper.plan, exit=Exit.SWEEP_CRASHED, error=repr(exc)
            )
            raise
        plan = sweeper.plan
        if plan.board_error:
            # D5: the one fail-closed guard — only for --apply; a dry run reports and exits 0.
            code = Exit.BOARD_UNREADABLE if apply else Exit.OK
            report = TickReport(TickOutcome.FAILED, plan, exit=code)
        elif plan.halts:
            report = TickReport(TickOutcome.HALTED, plan, exit=Exit.OK)
        elif not apply:
            report = TickReport(TickOutcome.DRY_RUN, plan)
        elif sweeper.results or drained.dispatched:
            # A dispatch that raised answered nothing, yet its items went out and were landed as
            # cannot-classify: that tick dispatched (and a human is told), it was not idle (D14).
            report = TickReport(
                TickOutcome.DISPATCHED,
                plan,
                sweeper.results,
                retried=drained.retried,
                unclassified=[int(e.item) for e in drained.unclassified],
            )
        else:
            report = TickReport(TickOutcome.IDLE, plan)
        report.page = sweeper.page
        return report
    finally:
        write_heartbeat(state, report, ctx.clock(), apply=apply)
        trace.event("TICK", **tick_record(report, switches, apply=apply))
