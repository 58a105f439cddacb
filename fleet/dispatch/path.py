"""The one path to a launch (D15): ``dispatch_batch`` runs seed 003's pre-flight for a batch of
requests, and ``dispatch`` — the hand path, ``invoke dispatch`` — is that path with one request.
The sweeper hands its plan to the same function. A guard lives here or nowhere.

The designed order — free local checks, then the network, then the one claim — so a refusal never
leaves a mark for a run that never started (D6):

    kill switches (halt file, PAUSE, DRAIN; then the halt issue)   before any worker is probed
    1 exists · 2 open (silent) · 3 not do-not-dispatch · 5 no open blocker    the fresh issue read
    7 CI baseline (advisory: recorded, never a refusal)
    8 reach/permission/runner + 4 capacity       one probe of the workers the batch needs
    9 clone synced                               one sync per worker
    6 no live run fleet-wide ─┐ one hold of the fleet-wide lock across the duplicate probe AND
    10 the unit-name claim   ─┘ the launch (D4), so a losing dispatcher's probe sees the winner
    0 PATH repair                                in every remote command and in the unit's env (D3)

What a batch shares is only what gives the same answer for each of its requests within the same
second: the switches and CI (read once), one probe, one sync of each worker's clone, one lock hold.
Two requests for one issue are never in one hold: the later one runs after, and sees the first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from fleet.board.base import BoardPage
from fleet.context import FleetContext
from fleet.core.model import CIState, Issue, WorkerView
from fleet.core.select import live_load
from fleet.inventory import WorkerConfig
from fleet.observe import probe_fleet

from .checks import (
    canary_taken,
    ci_baseline,
    fresh_issue,
    kill_switches,
    named_worker,
    pick,
    sync_clone,
    usable,
)
from .claim import Held, Ready, hold
from .result import DispatchResult, Refusal, new_run_id


@dataclass(frozen=True)
class Request:
    """One dispatch: ``issue``, on ``worker`` (None: the path chooses), as run ``run_id``."""

    issue: int
    worker: str | None = None
    run_id: str | None = None


@dataclass
class _Going:
    """A request still in the batch, and what its checks found so far."""

    at: int
    request: Request
    run_id: str
    issue: Issue | None = None
    w: WorkerConfig | None = None
    view: WorkerView | None = None


class _Batch:
    """The requests still going, and the answer of each that stopped: the bookkeeping, no checks."""

    def __init__(self, requests: Sequence[Request]) -> None:
        self.going = [_Going(i, r, r.run_id or new_run_id()) for i, r in enumerate(requests)]
        self.out: dict[int, DispatchResult] = {}
        self.size = len(requests)

    def end(self, g: _Going, result: DispatchResult) -> None:
        self.out[g.at] = result
        self.going.remove(g)

    def refuse(self, g: _Going, refusal: Refusal) -> None:
        worker = g.w.name if g.w is not None else g.request.worker
        self.end(g, DispatchResult.for_refusal(g.request.issue, refusal, g.run_id, worker))

    def each(self, check: Callable[[_Going], Refusal | None]) -> None:
        """Run ``check`` on every request still going; its refusal stops that request alone."""
        for g in list(self.going):
            refusal = check(g)
            if refusal is not None:
                self.refuse(g, refusal)

    def results(self) -> list[DispatchResult]:
        return [self.out[i] for i in range(self.size)]


def dispatch(
    ctx: FleetContext,
    issue: int,
    *,
    worker: str | None = None,
    dry_run: bool = False,
    page: BoardPage | None = None,
    ignore_ci: bool = False,
    run_id: str | None = None,
) -> DispatchResult:
    """Refuse or launch ``issue``: the batch path with one request. A hand dispatch is the
    operator's override of the scheduler's predicates (``scheduled=False``); every pre-flight
    check runs. ``page`` is a board page already read, used only for the halt-issue switch."""
    request = Request(issue, worker, run_id)
    return dispatch_batch(
        ctx, [request], page=page, ignore_ci=ignore_ci, dry_run=dry_run, scheduled=False
    )[0]


def dispatch_batch(
    ctx: FleetContext,
    requests: Sequence[Request],
    *,
    page: BoardPage | None = None,
    ignore_ci: bool = False,
    dry_run: bool = False,
    scheduled: bool = True,
) -> list[DispatchResult]:
    """One result per request, in order. ``scheduled``: the requests are a sweep's plan, so the
    fresh read re-asks the scheduler's marker predicates (``checks.fresh_issue``). ``dry_run``:
    every check up to the claim, and nothing synced, claimed or posted."""
    seen: set[int] = set()
    firsts: list[int] = []
    later: list[int] = []
    for i, req in enumerate(requests):
        (later if req.issue in seen else firsts).append(i)
        seen.add(req.issue)
    batch = _run(ctx, [requests[i] for i in firsts], page, ignore_ci, dry_run, scheduled)
    results = dict(zip(firsts, batch, strict=True))
    if later:
        again = dispatch_batch(
            ctx, [requests[i] for i in later], page=page, ignore_ci=ignore_ci, dry_run=dry_run,
            scheduled=scheduled,
        )  # fmt: skip
        results.update(zip(later, again, strict=True))
    return [results[i] for i in range(len(requests))]


def _run(
    ctx: FleetContext,
    requests: Sequence[Request],
    page: BoardPage | None,
    ignore_ci: bool,
    dry_run: bool,
    scheduled: bool,
) -> list[DispatchResult]:
    """Seed 003's order for requests of distinct issues (see the module's table)."""
    began = time.monotonic()
    b = _Batch(requests)
    gate = kill_switches(ctx, page)
    if isinstance(gate, Refusal):
        b.each(lambda g: gate)
        return b.results()
    b.each(lambda g: _read(ctx, g, dry_run=dry_run, scheduled=scheduled))
    baseline = ci_baseline(ctx, ignore_ci) if b.going else CIState.UNKNOWN.value
    _place(ctx, b)
    if dry_run:
        for g in list(b.going):
            assert g.w is not None
            b.end(g, DispatchResult.for_dry_run(g.request.issue, g.w.name, g.run_id))
        return b.results()
    _sync(ctx, b)
    if b.going:
        _claim(ctx, b, baseline, began)
    return b.results()


def _read(ctx: FleetContext, g: _Going, *, dry_run: bool, scheduled: bool) -> Refusal | None:
    """The fresh read's checks, then the named worker, which needs no network to look up."""
    issue = fresh_issue(ctx, g.request.issue, dry_run=dry_run, recheck=scheduled)
    if isinstance(issue, Refusal):
        return issue
    g.issue = issue
    if g.request.worker is not None:
        w = named_worker(ctx, g.request.worker)
        if isinstance(w, Refusal):
            return w
        g.w = w
    return None


def _place(ctx: FleetContext, b: _Batch) -> None:
    """Checks 8 and 4 from ONE probe: of the named workers when every request names one, else of
    the fleet, whose healthy workers the others are spread over (the sweeper's own rule)."""
    if not b.going:
        return
    named = {g.w.name for g in b.going if g.w is not None}
    if all(g.w is not None for g in b.going):
        views = probe_fleet(ctx, tuple(w for w in ctx.inventory.workers if w.name in named))
    else:
        views = probe_fleet(ctx)
    by_name, load = {v.name: v for v in views}, live_load(views)
    for g in list(b.going):
        assert g.issue is not None
        if g.w is None:
            w = pick(ctx, g.issue, views, load)
            if isinstance(w, Refusal):
                b.refuse(g, w)
                continue
            g.w = w
            load[w.name] += 1
        refusal = usable(ctx, g.w, by_name[g.w.name])
        if refusal is not None:
            b.refuse(g, refusal)
            continue
        g.view = by_name[g.w.name]
        if g.view.canary:  # one canary run per worker: dark again for the rest of the batch
            views = canary_taken(views, g.w.name)
            by_name[g.w.name] = replace(g.view, canary=False)


def _sync(ctx: FleetContext, b: _Batch) -> None:
    """Check 9 once per worker, the workers in parallel: every run of the batch starts from it."""
    groups: dict[str, list[_Going]] = {}
    for g in b.going:
        assert g.w is not None
        groups.setdefault(g.w.name, []).append(g)
    if not groups:
        return

    def one(gs: list[_Going]) -> Refusal | None:
        first = gs[0]
        assert first.w is not None
        return sync_clone(ctx, first.w, first.request.issue, first.run_id)

    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        answers = dict(zip(groups, pool.map(one, groups.values()), strict=True))
    b.each(lambda g: answers[g.w.name] if g.w is not None else None)


def _claim(ctx: FleetContext, b: _Batch, baseline: str, began: float) -> None:
    """Checks 6 and 10 in one lock hold (``claim.hold``), then each request's answer."""
    ready = []
    for g in b.going:
        assert g.issue is not None and g.w is not None and g.view is not None
        ready.append(Ready(g.at, g.issue, g.run_id, g.w, g.view))
    t_lock = time.monotonic()
    held = hold(ctx, ready, baseline)
    if isinstance(held, Refusal):
        b.each(lambda g: held)
        return
    for g in list(b.going):
        answer = held.answers[g.at]
        if isinstance(answer, Refusal):
            b.refuse(g, answer)
            continue
        assert g.w is not None
        timings = _timings(held, g.at, preflight_s=t_lock - began, size=b.size)
        b.end(g, DispatchResult.for_launch(g.request.issue, g.w.name, g.run_id, answer, timings))


def _timings(held: Held, at: int, *, preflight_s: float, size: int) -> dict[str, float]:
    return {
        "probe_to_live_s": held.live_at[at] - held.t_probe,
        "lock_held_s": held.held_s,
        "lock_wait_s": held.waited_s,
        "preflight_s": preflight_s,  # the batch's checks before the lock, shared
        "batch": float(size),
    }
