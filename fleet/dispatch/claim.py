"""Checks 6 and 10 under the fleet-wide lock (D4): the duplicate probe, the re-read of each issue's
last word, and the unit-name claims, in ONE hold for every request of a batch.

The seed's lesson is that a duplicate check outside the lock has a window it cannot close
(26–27 s measured): a losing dispatcher's probe must see the winner's unit, so the lock is held
across the probe AND the launch. Inside the hold only what D4 needs runs — unit lists (checks 8 and
4 ran before the lock), one board read, the claims — so the hold stays short.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.model import Issue, Unit, WorkerView, unit_name
from fleet.inventory import Inventory, WorkerConfig
from fleet.lock import FleetLock, LockTimeout, RemoteFleetLock
from fleet.observe import probe_fleet
from fleet.runner.prestart import BASELINE_ENV, STATE_DIR_ENV
from fleet.transport import TransportError
from fleet.units.base import Claim, UnitStart

from .checks import canary_still_open, claimed, live_on, no_live_run, relatched
from .result import Refusal


@dataclass(frozen=True)
class Ready:
    """A request that passed every check before the lock: its issue as the fresh read saw it, the
    worker it goes to and that worker's probe."""

    at: int  # its index in the batch
    issue: Issue
    run_id: str
    w: WorkerConfig
    view: WorkerView


@dataclass(frozen=True)
class Held:
    """What one hold of the lock answered: per request (by batch index) the launched unit or the
    refusal, when each went live, and the hold's own figures."""

    answers: dict[int, Unit | Refusal | None]
    live_at: dict[int, float]
    t_probe: float
    held_s: float
    waited_s: float


def fleet_lock(ctx: FleetContext) -> FleetLock | RemoteFleetLock:
    """The fleet-wide lock (D4): a file lock on this box, or — when the inventory names a lock
    host, for dispatchers on different machines — an flock held on that host over SSH for the
    same span. Both fail open with a warning on their own outage (D5)."""
    cfg = ctx.inventory.lock
    if cfg.host is None:
        return FleetLock(Path(cfg.path), wait_s=cfg.wait_s, stderr=ctx.stderr)
    host = ctx.worker(cfg.host)
    assert host is not None  # the inventory validates that lock.host names a worker
    opener = ctx.transport(host)
    return RemoteFleetLock(opener, str(cfg.path), wait_s=cfg.wait_s, stderr=ctx.stderr)  # type: ignore[arg-type]


def inventory_arg(inv: Inventory) -> str:
    """The inventory as a unit must name it: absolute, because a unit does not start in the
    dispatcher's working directory — a relative path launched runners that could not read it."""
    return os.path.abspath(inv.path)


def runner_argv(ctx: FleetContext, w: WorkerConfig, issue: int, run_id: str) -> list[str]:
    return [
        w.python, "-m", "fleet.runner", "--issue", str(issue), "--worker", w.name,
        "--run-id", run_id, "--inventory", inventory_arg(ctx.inventory),
    ]  # fmt: skip


def unit_env(ctx: FleetContext, r: Ready, baseline: str) -> dict[str, str]:
    """The unit's whole environment: PATH repaired from the probe (check 0, D3), the inventory,
    the run id, the CI baseline, and where a death before the start marker is recorded. With a
    runner clone (D11) the runner starts from the clone's code, so a step 1 that finds the clone
    already fresh needs no second interpreter (``fleet.runner.__main__``)."""
    env = {
        "PATH": r.view.path or "/usr/local/bin:/usr/bin:/bin",
        "FLEET_INVENTORY": inventory_arg(ctx.inventory),
        "FLEET_RUN_ID": r.run_id,
        BASELINE_ENV: baseline,
        STATE_DIR_ENV: r.w.state_dir,
    }
    if r.w.runner_clone and os.path.isabs(r.w.runner_clone):  # no shell expands a unit's env
        env["PYTHONPATH"] = r.w.runner_clone
    return env


def hold(ctx: FleetContext, ready: Sequence[Ready], baseline: str) -> Held | Refusal:
    """One hold of the fleet lock across one duplicate probe and every claim of ``ready``; the
    lock's timeout is the whole batch's refusal."""
    answers: dict[int, Unit | Refusal | None] = {}
    live_at: dict[int, float] = {}
    try:
        with fleet_lock(ctx) as lock:
            t_probe = time.monotonic()
            views = probe_fleet(ctx, units_only=True)  # 8 and 4 ran before the lock
            lanes = _by_worker(_still_free(ctx, ready, views, answers))
            if lanes:
                with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
                    started = pool.map(lambda lane: _start(ctx, lane, baseline), lanes)
                    for r, answer, when in (one for lane in started for one in lane):
                        answers[r.at] = answer
                        if when is not None:
                            live_at[r.at] = when
    except LockTimeout as exc:
        return Refusal(10, Exit.LOCK_TIMEOUT, str(exc))
    return Held(answers, live_at, t_probe, lock.report.held_s or 0.0, lock.report.waited_s)


def _still_free(
    ctx: FleetContext,
    ready: Sequence[Ready],
    views: tuple[WorkerView, ...],
    answers: dict[int, Unit | Refusal | None],
) -> list[Ready]:
    """Check 6 on the probe under the lock (and a canary's check 4 again), then each issue's last
    word re-read: a cancel that landed since the fresh read wins (40). An issue already live on its
    own worker is left to the name claim, which names the unit it found (41)."""
    going: list[Ready] = []
    for r in ready:
        refusal = no_live_run(ctx, views, r.issue.number, r.w) or canary_still_open(
            r.w, r.view, views
        )
        if refusal is not None:
            answers[r.at] = refusal
        else:
            going.append(r)
    late = relatched(
        ctx, {r.issue.number: r.issue for r in going if not live_on(views, r.w, r.issue.number)}
    )
    for r in going:
        if r.issue.number in late:
            answers[r.at] = Refusal(6, Exit.LATCHED_UNDER_LOCK, late[r.issue.number], r.w.name)
    return [r for r in going if r.at not in answers]


def _by_worker(going: Sequence[Ready]) -> list[list[Ready]]:
    """The claims grouped by worker: each worker's go to its supervisor in one call, the workers
    side by side."""
    by_worker: dict[str, list[Ready]] = {}
    for r in going:
        by_worker.setdefault(r.w.name, []).append(r)
    return list(by_worker.values())


def _start(
    ctx: FleetContext, lane: Sequence[Ready], baseline: str
) -> list[tuple[Ready, Unit | Refusal | None, float | None]]:
    """Check 10 for one worker's claims: claim each name ``task-N`` by starting its unit, in one
    round trip where the supervisor can (``start_many``); each claim answers for itself, and when
    it answered."""
    w = lane[0].w
    starts = [
        UnitStart(
            r.issue.number, tuple(runner_argv(ctx, w, r.issue.number, r.run_id)),
            unit_env(ctx, r, baseline), w.max_run_s,
        )
        for r in lane
    ]  # fmt: skip
    lost = "the supervisor's answer was lost"
    try:
        claims: list[Claim | None] = ctx.supervisor(w).start_many(starts)
    except TransportError as exc:
        claims, lost = [None] * len(lane), str(exc)
    answered = time.monotonic()
    if None in claims:
        ctx.forget(w.name)
    out: list[tuple[Ready, Unit | Refusal | None, float | None]] = []
    for r, claim in zip(lane, claims, strict=True):
        if claim is None:
            # The start may have reached the worker before the answer was lost: the unit may be
            # live. Not "the supervisor refused" (43): say we cannot tell, and let the next probe
            # see (D20).
            n = r.issue.number
            why = f"worker {w.name}: the claim got no answer ({lost}); {unit_name(n)} may be live there"
            out.append((r, Refusal(10, Exit.CLAIM_UNCONFIRMED, why, w.name), None))
        else:
            out.append((r, claimed(claim, w), answered))
    return out
