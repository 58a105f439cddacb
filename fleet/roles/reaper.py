"""The reaper (D14): a Loop on the engine that resets orphaned starts; the decision is ``fleet.core.reap``.

One tick = probe every worker (``dispatch()``'s own probe), then read the board, then decide (pure),
then — with ``apply`` — post a ``reaped`` marker on each orphan. The order is load-bearing:

* **probe first, board second.** A run that is live at the probe is seen live. One that ended
  after the probe posted its terminal before it ended (the runner closes out, then exits), so the
  board read that follows sees that terminal and the start is no longer the last word. Read the
  board first and a run finishing between the two reads would look orphaned.
* **re-read before the write.** Just before posting, the issue is read again and its last word
  must still be the very start comment the decision judged; anything newer (a terminal, a release,
  another reaper's marker) wins, and nothing is posted.
* **under the fleet lock** (``--apply`` only): no dispatch can probe and launch in between (D4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.board.base import BoardError
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.markers import history, open_start
from fleet.core.model import Snapshot
from fleet.core.reap import ReapDecision, reap_decisions, reaped_marker, threshold_warning
from fleet.observe import probe_fleet, read_page
from fleet.roles.base import begin, drain_role
from fleet.roles.engine import Failure, IndependentItems, Result
from fleet.trace import Trace, to_jsonable
from fleet.trace.codec import decode, decode_snapshot
from fleet.trace.replay import Comparison, RecordError, compare, register


@dataclass
class ReapReport:
    """What one reaper tick decided and did. ``outcome``: dry-run | reaped | nothing | failed."""

    outcome: str
    threshold_s: int
    decisions: tuple[ReapDecision, ...] = ()
    reaped: list[int] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # changed since the probe: not posted
    failures: list[str] = field(default_factory=list)  # a write that did not take
    unchecked: tuple[str, ...] = ()  # workers the probe could not check, with the reason
    board_error: str | None = None
    lock_error: str | None = None
    exit: Exit = Exit.OK

    def counts(self) -> dict[str, int]:
        states = _states(self.decisions)
        return {"open_starts": len(self.decisions), "reaped": len(self.reaped), **states}

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "threshold_s": self.threshold_s,
            "exit": int(self.exit),
            "counts": self.counts(),
            "decisions": to_jsonable(self.decisions),
            "reaped": self.reaped,
            "skipped": self.skipped,
            "failures": self.failures,
            "unchecked": list(self.unchecked),
            "board_error": self.board_error,
            "lock_error": self.lock_error,
        }


class Reaper(IndependentItems[ReapDecision]):
    """A Loop: ``select_queue`` probes, reads and decides; ``dispatch`` posts one reaped marker."""

    def __init__(self, ctx: FleetContext, trace: Trace, *, apply: bool) -> None:
        self.ctx, self.trace, self.apply = ctx, trace, apply
        self.snap: Snapshot | None = None
        self.decisions: tuple[ReapDecision, ...] = ()
        self.reaped: list[int] = []
        self.skipped: list[str] = []
        self.failures: list[str] = []

    # the six methods
    def name(self) -> str:
        return "reaper"

    def select_queue(self) -> Sequence[ReapDecision]:
        workers = probe_fleet(self.ctx)  # first: see the module docstring
        page, error = read_page(self.ctx)
        self.snap = Snapshot(
            now=self.ctx.clock(),
            issues=page.issues if page is not None else (),
            workers=workers,
            policy=self.ctx.inventory.policy,
            board_error=error,
        )
        self.decisions = reap_decisions(self.snap)
        self.trace.event(
            "REAP",
            apply=self.apply,
            summary=" ".join(f"{k}={v}" for k, v in sorted(_states(self.decisions).items())),
            snapshot=to_jsonable(self.snap),
            decisions=to_jsonable(self.decisions),
        )
        if not self.apply:
            return ()
        return tuple(d for d in self.decisions if d.reap)

    def _one(self, item: ReapDecision) -> Result:
        n = item.issue
        try:
            issue = self.ctx.board.issue(n)
        except BoardError as exc:
            return Result(False, f"#{n}: not reaped, the re-read failed: {exc}", Failure.RETRY)
        start = None
        if issue is not None and issue.is_open:
            start = open_start(history(issue, self.ctx.inventory.policy))
        if start is None or start.comment_id != item.start_comment:
            why = f"#{n}: not reaped, its last word changed since the probe (a newer word wins)"
            return Result(False, why, Failure.REFUSE)
        try:
            self.ctx.board.comment(n, reaped_marker(item))
        except BoardError as exc:
            return Result(False, f"#{n}: the reaped marker was not posted: {exc}", Failure.RETRY)
        return Result(True, f"#{n}: reaped")

    def land(self, item: ReapDecision, result: Result) -> None:
        if result.ok:
            self.reaped.append(item.issue)
        elif result.failure is Failure.REFUSE:
            self.skipped.append(result.detail)
        else:
            self.failures.append(result.detail)
            self.ctx.warn(f"fleet: {result.detail}")

    def on_idle(self) -> bool:
        return False  # one tick per call; the timer is the loop


def _states(decisions: Sequence[ReapDecision]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in decisions:
        out[d.state] = out.get(d.state, 0) + 1
    return out


def reap(ctx: FleetContext, *, apply: bool, trace: Trace | None = None) -> ReapReport:
    """One reaper tick. A dry run (``apply=False``) decides and writes nothing to the board."""
    hold, apply, trace = begin(ctx, "reap", apply, trace)
    inv = ctx.inventory
    threshold = inv.policy.reaper_threshold_s
    for w in inv.workers:
        warning = threshold_warning(threshold, w.max_run_s, w.name)
        if warning:
            ctx.warn(warning)
    reaper = Reaper(ctx, trace, apply=apply)
    lock_error = drain_role(ctx, reaper, trace, apply=apply, key=lambda d: str(d.issue))
    snap = reaper.snap
    report = ReapReport(
        outcome="failed",
        threshold_s=threshold,
        decisions=reaper.decisions,
        reaped=reaper.reaped,
        skipped=reaper.skipped,
        failures=reaper.failures,
        unchecked=tuple(
            f"{w.name} ({w.reach}: {w.detail})"
            for w in (snap.workers if snap else ())
            if not w.reachable
        ),
        board_error=snap.board_error if snap else None,
        lock_error=lock_error,
    )
    if lock_error is not None:
        report.exit = Exit.LOCK_TIMEOUT
    elif report.board_error is not None:
        # D5: the queue could not be read — fatal only for the applying mode.
        report.exit = Exit.BOARD_UNREADABLE if apply else Exit.OK
    elif report.failures:
        report.exit = Exit.WRITE_FAILED
    elif not apply:
        report.outcome = "held" if hold is not None else "dry-run"
    else:
        report.outcome = "reaped" if report.reaped else "nothing"
    trace.event("REAP_END", outcome=report.outcome, exit=int(report.exit), counts=report.counts())
    return report


def _verdicts(decisions: Sequence[ReapDecision]) -> dict[tuple[int | None, str], str]:
    return {(d.issue, "reap"): f"{d.state}: {d.why}" for d in decisions}


def replay_reap(record: Mapping[str, Any]) -> Comparison:
    """A ``REAP`` trace line: ``reap_decisions`` on the recorded snapshot against the recorded
    decisions (seed 001 §9: a production run is a sequence of values)."""
    for name in ("snapshot", "decisions"):
        if name not in record:
            raise RecordError(f"REAP has no {name!r} field")
    snap = decode_snapshot(record["snapshot"])
    recorded = decode(tuple[ReapDecision, ...], record["decisions"], "decisions")
    return compare(_verdicts(recorded), _verdicts(reap_decisions(snap)))


register("REAP", replay_reap)

__all__ = ["ReapReport", "Reaper", "reap", "replay_reap"]
