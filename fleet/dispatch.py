"""``dispatch(issue)``: the only path to a launch (D15). ``invoke dispatch`` and the tests call this
function; the sweeper calls ``dispatch_batch`` (below), which runs the same checks through the same
functions and shares only their round trips across a batch. A guard lives here or nowhere.

Seed 003's pre-flight, in its designed order — free local checks, then the network, then the one
claim — so a refusal never leaves a mark for a run that never started (D6):

    kill switches (halt file, halt issue), pause, drain       local, before anything reaches the network
    1 issue exists · 2 issue open (silent) · 3 not do-not-dispatch (comments once)
    5 no open blocker · 7 CI not red (unreadable CI is not red)
    8 reach/permission/runner (three tokens) + 4 capacity     one round trip to the worker
    9 clone synced (dirty work stashed, never discarded)
    6 no live run fleet-wide ─┐ under the fleet-wide lock, held across the probe AND the launch (D4),
    10 the unit-name claim   ─┘ so a losing dispatcher's probe sees the winner's unit
    0 PATH repair: in every remote command (the transport) and passed to the unit explicitly (D3)

Check 6 runs inside the lock: the seed's lesson is that a duplicate check outside it has a window
it cannot close (26–27 s measured). Each refusal returns its own exit code (fleet.exits) and one
line naming the check; none writes to the board except check 3.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from fleet.board.base import BoardError, BoardPage, BoardUnreadable
from fleet.context import FleetContext
from fleet.exits import Exit
from fleet.halt import read_halt_file
from fleet.inventory import Inventory, WorkerConfig
from fleet.last_word import latched_since
from fleet.lock import FleetLock, LockTimeout, RemoteFleetLock
from fleet.markers import Kind, history, render
from fleet.model import CapacitySource, CIState, Issue, Reach, Unit, WorkerView
from fleet.observe import probe_fleet, probe_worker
from fleet.origin import target_origins
from fleet.runner.capacity import describe
from fleet.runner.prestart import STATE_DIR_ENV
from fleet.select import (
    CAPACITY_LOOP,
    choose_worker,
    fresh_hold,
    halt_line,
    healthy,
    issue_halts,
    live_load,
    marked_do_not_dispatch,
)
from fleet.sync import SyncState, parse_sync, sync_command
from fleet.transport import TransportError
from fleet.units import Claim, ClaimCode, unit_name

# The unit's environment names the CI baseline the run starts on; the runner's start marker says it.
BASELINE_ENV = "FLEET_BASELINE"
# Check 9 may fetch a large repository: bounded so one slow worker cannot hold a sweep.
SYNC_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class DispatchResult:
    issue: int
    outcome: str  # "launched" | "refused" | "dry-run"
    check: int | None  # the pre-flight check that refused (None when launched / dry-run)
    code: Exit
    reason: str
    worker: str | None = None
    unit: str | None = None
    run_id: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # probe_to_live_s, lock_held_s, ...

    @property
    def launched(self) -> bool:
        return self.outcome == "launched"

    def line(self) -> str:
        """The one-line reason for stderr, naming the check."""
        if self.outcome == "refused":
            return f"fleet: #{self.issue} refused by check {self.check}: {self.reason}"
        return f"fleet: #{self.issue} {self.outcome} on {self.worker} as {self.unit}: {self.reason}"

    def to_json(self) -> dict[str, object]:
        return {
            "issue": self.issue,
            "outcome": self.outcome,
            "check": self.check,
            "code": int(self.code),
            "reason": self.reason,
            "worker": self.worker,
            "unit": self.unit,
            "run_id": self.run_id,
        }


class _Refused(Exception):
    def __init__(self, check: int | None, code: Exit, reason: str, worker: str | None = None):
        super().__init__(reason)
        self.check, self.code, self.reason, self.worker = check, code, reason, worker


def new_run_id(now: float | None = None) -> str:
    """A run has an id; a unit does not (STYLE 11): worktrees, traces and logs carry this."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def _kill_switches(ctx: FleetContext, page: BoardPage | None) -> BoardPage:
    """The file switches before anything reaches the network, then the board read the halt issue
    needs (the sweeper's page when it passed one: zero extra calls), before any worker is probed."""
    now = ctx.clock()
    halt = read_halt_file(Path(ctx.inventory.halt.file), now)
    if halt is not None:
        raise _Refused(0, Exit.HALTED_FILE, halt_line(halt, now))
    state = Path(ctx.inventory.state_dir)
    if (state / "PAUSE").exists():
        raise _Refused(0, Exit.PAUSED, f"paused ({state / 'PAUSE'}): only cancels are decided")
    if (state / "DRAIN").exists():
        raise _Refused(0, Exit.DRAINING, f"draining ({state / 'DRAIN'}): no new work is started")
    if page is None:
        try:
            page = ctx.board.read()
        except BoardUnreadable as exc:
            raise _Refused(1, Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
    for h in issue_halts(page.issues, ctx.inventory.policy):
        raise _Refused(0, Exit.HALTED_ISSUE, halt_line(h, now))
    return page


def _the_issue(ctx: FleetContext, number: int, dry_run: bool, *, recheck: bool = False) -> Issue:
    # Always a fresh read, never the sweeper's page: the page is up to a cycle old, and an issue
    # closed 46 s before a run started is exactly what checks 1 and 2 exist for (seed 003).
    try:
        issue = ctx.board.issue(number)
    except BoardUnreadable as exc:
        raise _Refused(1, Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
    if issue is None:  # 1
        raise _Refused(1, Exit.ISSUE_MISSING, f"issue #{number} does not exist")
    if not issue.is_open:  # 2: silent — a marker would latch a later reopen
        raise _Refused(2, Exit.ISSUE_CLOSED, f"issue #{number} is closed")
    dnd = ctx.inventory.policy.do_not_dispatch
    if marked_do_not_dispatch(issue.title, dnd):  # 3: a permanent property, so it comments
        h = history(issue, ctx.inventory.policy)
        if not dry_run and h.last_of(Kind.DO_NOT_DISPATCH) is None:
            note = f"The title carries {dnd}; fleet will not dispatch this issue."
            try:
                ctx.board.comment(number, render(Kind.DO_NOT_DISPATCH, {}, note))
            except BoardError as exc:
                raise _Refused(
                    3, Exit.WRITE_FAILED, f"title marked {dnd}; its notice was not posted: {exc}"
                ) from None
        raise _Refused(3, Exit.DO_NOT_DISPATCH, f"title marked {dnd}")
    if issue.open_blockers:  # 5
        refs = ", ".join(f"#{b}" for b in issue.open_blockers)
        raise _Refused(5, Exit.BLOCKED, f"blocked by {refs} (open)")
    # The sweeper's page may be a cycle old, and on GitHub a flood of comments can push markers out
    # of its window: the sweeper's dispatches re-ask predicates 12 and 6-8 of this fresh read. A
    # hand dispatch is the operator's override of the scheduler's predicates, as it always was.
    held = fresh_hold(issue, ctx.inventory.policy, ctx.clock()) if recheck else None
    if held is not None:  # not a pre-flight check of the seed's: named by predicate and code
        reason = f"predicate {held.predicate} ({held.state}) on the fresh read: {held.reason}"
        code = Exit.CAPACITY_LOOP if held.state == CAPACITY_LOOP else _HOLD_CODES[held.predicate]
        raise _Refused(None, code, reason)
    return issue


_HOLD_CODES = {6: Exit.LATCHED, 7: Exit.EXHAUSTED, 8: Exit.MARKER_PARKED, 12: Exit.UNAPPROVED}


def _ci(ctx: FleetContext, ignore_ci: bool) -> str:
    """Check 7, advisory (seed 003): the baseline this run starts on — ``green``, ``red`` or
    ``unknown`` — recorded in its start marker, never a refusal. A red ``main`` refused every
    dispatch before, the issue that would fix CI included; and a run on a red baseline spends no
    attempt when it fails (``fleet.markers.history``), because the failure may be the baseline's."""
    try:
        state = ctx.board.ci_status()
    except BoardError as exc:  # a guard's own outage fails open (D5)
        ctx.warn(f"fleet: warning: CI status unreadable ({exc}); treated as not red")
        return CIState.UNKNOWN.value
    if state is CIState.RED and not ignore_ci:
        ctx.warn(
            "fleet: CI on main is red: the run starts on a red baseline (check 7 is advisory); "
            "its start marker says baseline=red, and a failure it ends in spends no attempt"
        )
    if state is CIState.UNKNOWN:
        ctx.warn("fleet: CI status unknown; unreadable CI is never treated as red")
    return state.value


def _choose(ctx: FleetContext, issue: Issue, wanted: str | None) -> WorkerConfig:
    if wanted is not None:
        w = ctx.worker(wanted)
        if w is None:
            raise _Refused(
                None, Exit.NO_SUCH_WORKER, f"no worker named {wanted!r} in the inventory"
            )
        return w
    return _pick(ctx, issue, probe_fleet(ctx))


def _pick(
    ctx: FleetContext,
    issue: Issue,
    views: tuple[WorkerView, ...],
    load: dict[str, int] | None = None,
) -> WorkerConfig:
    pool = healthy(views)
    if not pool:
        if any(v.reachable for v in views):
            raise _Refused(4, Exit.ALL_DARK, "every reachable worker is capacity-dark")
        raise _Refused(8, Exit.NONE_REACHABLE, "no worker is reachable")
    load = live_load(views) if load is None else load
    name, _why = choose_worker(issue, pool, load)  # the sweeper's own rule
    w = ctx.worker(name)
    assert w is not None
    return w


_REACH_CODES = {
    Reach.UNREACHABLE: Exit.UNREACHABLE,
    Reach.NO_PERMISSION: Exit.NO_PERMISSION,
    Reach.NO_RUNNER: Exit.NO_RUNNER,
}


def _reach_and_capacity(ctx: FleetContext, w: WorkerConfig) -> WorkerView:
    view, warnings = probe_worker(ctx, w)
    for line in warnings:
        ctx.warn(f"fleet: {line}")
    return _usable(ctx, w, view)


def _usable(ctx: FleetContext, w: WorkerConfig, view: WorkerView) -> WorkerView:
    """Checks 8 and 4 on one probe's answer for ``w``."""
    if view.reach is not Reach.OK:  # 8: three distinct codes; no token means nothing ran
        raise _Refused(
            8, _REACH_CODES[view.reach], f"worker {w.name}: {view.reach}: {view.detail}", w.name
        )
    if view.capacity is not None and view.dark:  # 4: one remedy per source (D8)
        code = (
            Exit.DARK_REVOKED
            if view.capacity.source is CapacitySource.REVOKED
            else Exit.DARK_RATE_LIMIT
        )
        raise _Refused(4, code, f"worker {w.name} {describe(view.capacity, ctx.clock())}", w.name)
    return view


def _canary_still_open(w: WorkerConfig, view: WorkerView, views: tuple[WorkerView, ...]) -> None:
    """Check 4 again under the fleet lock, for a canary only: its one run goes only while the
    worker has no live unit, so two dispatchers that both saw the canary open send one (D8)."""
    if not view.canary:
        return
    for v in views:
        live = [u.name for u in v.units if u.live] if v.name == w.name else []
        if live:
            raise _Refused(
                4,
                Exit.DARK_RATE_LIMIT,
                f"worker {w.name} dark: rate limit, reset unknown; its one canary run is taken "
                f"({', '.join(live)} live)",
                w.name,
            )


def _sync(ctx: FleetContext, w: WorkerConfig, issue: int, run_id: str) -> str:
    origin = str(ctx.inventory.board.origin) if ctx.inventory.board.origin else None
    accept = target_origins(ctx.inventory.board)
    cmd = sync_command(w.clone, origin=origin, note=f"run {run_id} of #{issue}", accept=accept)
    try:
        res = ctx.transport(w).run(cmd, timeout=SYNC_TIMEOUT_S)
        out = parse_sync(res.stdout)
    except TransportError as exc:
        ctx.forget(w.name)
        out = parse_sync(None)
        out = type(out)(out.state, f"{out.detail}: {exc}")
    if out.state is SyncState.FOREIGN_ORIGIN:  # 9: an agent may have rewritten .git/config
        raise _Refused(
            9,
            Exit.CLONE_FOREIGN_ORIGIN,
            f"worker {w.name} clone {w.clone}: origin is {out.detail}, the inventory names "
            f"{accept.describe()}",
            w.name,
        )
    if not out.synced:  # 9
        raise _Refused(
            9, Exit.CLONE_UNSYNCED, f"worker {w.name} clone {w.clone}: {out.detail}", w.name
        )
    if out.state is SyncState.STASHED:
        ctx.warn(
            f"fleet: worker {w.name}: dirty clone {w.clone} stashed before the run "
            "(git stash list there)"
        )
    return out.detail


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
        w.python,
        "-m",
        "fleet.runner",
        "--issue",
        str(issue),
        "--worker",
        w.name,
        "--run-id",
        run_id,
        "--inventory",
        inventory_arg(ctx.inventory),
    ]


def _live(units: tuple[Unit, ...], issue: int) -> list[Unit]:
    return [u for u in units if u.issue == issue and u.live]


def _claim(
    ctx: FleetContext,
    w: WorkerConfig,
    view: WorkerView,
    the: Issue,
    run_id: str,
    timings: dict[str, float],
    baseline: str,
) -> Unit | None:
    """Checks 6 and 10 under the fleet lock: probe every worker, re-read the last word, then
    claim the name."""
    inv = ctx.inventory
    issue = the.number
    try:
        with fleet_lock(ctx) as lock:
            t_probe = time.monotonic()
            views = probe_fleet(ctx)
            _no_live_run(ctx, views, issue, w)
            late = _relatched(ctx, {issue: the}) if not _live_on(views, w, issue) else {}
            if late:
                raise _Refused(6, Exit.LATCHED_UNDER_LOCK, late[issue], w.name)
            _canary_still_open(w, view, views)
            env = {
                "PATH": view.path or "/usr/local/bin:/usr/bin:/bin",
                "FLEET_INVENTORY": inventory_arg(inv),
                "FLEET_RUN_ID": run_id,
                BASELINE_ENV: baseline,
                STATE_DIR_ENV: w.state_dir,  # where a death before the start marker is recorded
            }
            claim = ctx.supervisor(w).start(
                issue, runner_argv(ctx, w, issue, run_id), env=env, max_run_s=w.max_run_s
            )
            t_live = time.monotonic()
        timings["probe_to_live_s"] = t_live - t_probe
        timings["lock_held_s"] = lock.report.held_s or 0.0
        timings["lock_wait_s"] = lock.report.waited_s
    except LockTimeout as exc:
        raise _Refused(10, Exit.LOCK_TIMEOUT, str(exc)) from None
    except TransportError as exc:
        ctx.forget(w.name)
        # The start may have reached the worker before the connection broke: the unit may be live.
        # Not "the supervisor refused" (43): say we cannot tell, and let the next probe see (D20).
        raise _Refused(
            10,
            Exit.CLAIM_UNCONFIRMED,
            f"worker {w.name}: the claim got no answer ({exc}); task-{issue} may be live there",
            w.name,
        ) from None
    return _claimed(claim, w)


def _live_on(views: tuple[WorkerView, ...], w: WorkerConfig | None, issue: int) -> bool:
    """A live unit of ``issue`` on the dispatching worker itself. The re-read of the last word is
    then left out: that unit's start is the newer word, and the name claim (check 10) refuses with
    the more specific answer, the unit it found."""
    return w is not None and any(v.name == w.name and _live(v.units, issue) for v in views)


def _relatched(ctx: FleetContext, before: Mapping[int, Issue]) -> dict[int, str]:
    """The last word of each issue re-read inside the lock hold (``fleet.last_word``): one issue
    read for one dispatch, one page read for a batch. Its own outage fails open (D5): every check
    already passed on a fresh read."""
    try:
        if len(before) == 1:
            now = {n: ctx.board.issue(n) for n in before}
        else:
            now = {i.number: i for i in ctx.board.read().issues}
    except BoardError as exc:
        ctx.warn(
            f"fleet: warning: the re-read of the last marker under the fleet lock failed ({exc}); "
            "proceeding on the fresh read"
        )
        return {}
    policy = ctx.inventory.policy
    why = {n: latched_since(b, now.get(n), policy) for n, b in before.items()}
    return {n: w for n, w in why.items() if w is not None}


def _no_live_run(
    ctx: FleetContext, views: tuple[WorkerView, ...], issue: int, w: WorkerConfig
) -> None:
    """Check 6 on a probe taken under the fleet lock."""
    for v in views:
        if not v.reachable:  # could-not-check is not "no unit": say so, proceed (D5)
            ctx.warn(
                f"fleet: warning: worker {v.name} could not be probed for #{issue} "
                f"({v.detail}); proceeding on the rest of the fleet"
            )
            continue
        live = _live(v.units, issue)
        if live and v.name != w.name:  # 6: another worker or master holds it
            raise _Refused(
                6,
                Exit.HELD_OTHER_WORKER,
                f"task-{issue} is live on {v.name} (master {live[0].master})",
                v.name,
            )


def _claimed(claim: Claim, w: WorkerConfig) -> Unit | None:
    """Check 10's answer: the launched unit, or the refusal with the claim's own code."""
    if claim.code is ClaimCode.LAUNCHED:
        return claim.unit
    code = {ClaimCode.HELD_LIVE: Exit.HELD_LIVE, ClaimCode.HELD_FINISHED: Exit.HELD_FINISHED}.get(
        claim.code, Exit.SUPERVISOR_FAILED
    )
    raise _Refused(10, code, f"worker {w.name}: {claim.code}: {claim.detail}", w.name)


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
    """Refuse or launch ``issue``. ``page`` is the board page a sweeper already fetched: it is
    used only for the halt-issue switch (zero extra calls); the issue itself is always re-read."""
    run_id = run_id or new_run_id()
    timings: dict[str, float] = {}
    chosen: str | None = worker
    try:
        page = _kill_switches(ctx, page)
        the = _the_issue(ctx, issue, dry_run)
        baseline = _ci(ctx, ignore_ci)
        w = _choose(ctx, the, worker)
        chosen = w.name
        view = _reach_and_capacity(ctx, w)
        if dry_run:
            return DispatchResult(
                issue,
                "dry-run",
                None,
                Exit.OK,
                "every check up to the claim passed; nothing launched",
                w.name,
                unit_name(issue),
                run_id,
            )
        _sync(ctx, w, issue, run_id)
        unit = _claim(ctx, w, view, the, run_id, timings, baseline)
    except _Refused as r:
        return DispatchResult(
            issue,
            "refused",
            r.check,
            r.code,
            r.reason,
            r.worker or chosen,
            unit_name(issue),
            run_id,
            timings,
        )
    except BoardError as exc:
        return DispatchResult(
            issue,
            "refused",
            3,
            Exit.WRITE_FAILED,
            f"board write failed: {exc}",
            chosen,
            unit_name(issue),
            run_id,
            timings,
        )
    started = f"start {unit.start_us} µs monotonic" if unit is not None else "started"
    return DispatchResult(
        issue, "launched", None, Exit.OK, started, w.name, unit_name(issue), run_id, timings
    )


# -- several dispatches, one probe and one lock hold ------------------------------------------------


# Claims in flight at once on one worker's connection, under the lock. Each is one round trip that
# mostly waits on the worker (systemd-run -p Type=exec returns after the exec), so the hold shrinks
# with this; sshd refuses an eleventh session on one connection (MaxSessions 10), and the probes of
# a concurrent command may share the connection too, so 4 leaves room.
CLAIMS_PER_WORKER = 4


@dataclass(frozen=True)
class Request:
    """One dispatch of a batch: ``dispatch(ctx, issue, worker=worker, run_id=run_id)``."""

    issue: int
    worker: str | None = None
    run_id: str | None = None


@dataclass
class _Going:
    """A request that has passed every check so far, and what the checks found."""

    at: int  # its index in the batch
    issue: int
    run_id: str
    w: WorkerConfig | None = None
    view: WorkerView | None = None


def _refusal(r: _Refused, issue: int, run_id: str, worker: str | None) -> DispatchResult:
    return DispatchResult(
        issue, "refused", r.check, r.code, r.reason, r.worker or worker, unit_name(issue), run_id
    )


def dispatch_batch(
    ctx: FleetContext,
    requests: Sequence[Request],
    *,
    page: BoardPage | None = None,
    ignore_ci: bool = False,
) -> list[DispatchResult]:
    """Several dispatches sharing the pre-flight's round trips; one result per request, in order.

    Every check of :func:`dispatch` runs, in the same order and with the same codes, through the
    same functions; what is shared is only what would give the same answer for every request of
    the batch within the same second: the kill switches and CI (read once), ONE probe of the fleet
    that answers check 8 and 4 for every chosen worker, ONE sync of each worker's clone (check 9),
    and ONE hold of the fleet lock across ONE duplicate probe and every claim (checks 6 and 10).
    That is still D4's guarantee: no other dispatcher can claim between the probe and the claims,
    and the unit name refuses a second start of an issue on the same master. Two requests for one
    issue are never in one hold: the later one runs after, and its probe sees the first's unit.
    """
    seen: set[int] = set()
    firsts, later = [], []
    for i, req in enumerate(requests):
        (later if req.issue in seen else firsts).append(i)
        seen.add(req.issue)
    results: dict[int, DispatchResult] = dict(
        zip(firsts, _batch(ctx, [requests[i] for i in firsts], page, ignore_ci), strict=True)
    )
    if later:
        again = dispatch_batch(ctx, [requests[i] for i in later], page=page, ignore_ci=ignore_ci)
        results.update(zip(later, again, strict=True))
    return [results[i] for i in range(len(requests))]


def _batch(
    ctx: FleetContext, requests: Sequence[Request], page: BoardPage | None, ignore_ci: bool
) -> list[DispatchResult]:
    began = time.monotonic()
    out: dict[int, DispatchResult] = {}
    going = [_Going(i, r.issue, r.run_id or new_run_id()) for i, r in enumerate(requests)]

    def refuse(g: _Going, r: _Refused) -> None:
        out[g.at] = _refusal(r, g.issue, g.run_id, g.w.name if g.w else requests[g.at].worker)

    def refuse_all(r: _Refused) -> None:
        for g in going:
            refuse(g, r)
        going.clear()

    try:
        page = _kill_switches(ctx, page)
    except _Refused as r:
        refuse_all(r)
    issues: dict[int, Issue] = {}
    for g in list(going):
        try:
            issues[g.at] = _the_issue(ctx, g.issue, False, recheck=True)
        except _Refused as r:
            refuse(g, r)
            going.remove(g)
        except BoardError as exc:
            refuse(g, _Refused(3, Exit.WRITE_FAILED, f"board write failed: {exc}"))
            going.remove(g)
    baseline = _ci(ctx, ignore_ci) if going else CIState.UNKNOWN.value
    if going:  # 8 and 4: one probe of the fleet answers for every chosen worker
        views = probe_fleet(ctx)
        by_name = {v.name: v for v in views}
        load = live_load(views)
        for g in list(going):
            wanted = requests[g.at].worker
            try:
                if wanted is None:
                    g.w = _pick(ctx, issues[g.at], views, load)
                    load[g.w.name] += 1
                else:
                    g.w = _choose(ctx, issues[g.at], wanted)
                g.view = _usable(ctx, g.w, by_name[g.w.name])
                if g.view.canary:  # one canary run per worker: dark again for the rest
                    views = _canary_taken(views, g.w.name)
                    by_name[g.w.name] = replace(g.view, canary=False)
            except _Refused as r:
                refuse(g, r)
                going.remove(g)
    _sync_once(ctx, going, refuse)
    if going:
        _claim_batch(
            ctx, going, issues, refuse, out, began=began, size=len(requests), baseline=baseline
        )
    return [out[i] for i in range(len(requests))]


def _canary_taken(views: tuple[WorkerView, ...], name: str) -> tuple[WorkerView, ...]:
    return tuple(replace(v, canary=False) if v.name == name else v for v in views)


def _by_worker(going: list[_Going]) -> dict[str, list[_Going]]:
    groups: dict[str, list[_Going]] = {}
    for g in going:
        assert g.w is not None
        groups.setdefault(g.w.name, []).append(g)
    return groups


def _sync_once(
    ctx: FleetContext, going: list[_Going], refuse: Callable[[_Going, _Refused], None]
) -> None:
    """Check 9 once per worker (in parallel): every run of the batch starts from that sync."""
    groups = _by_worker(going)

    def one(gs: list[_Going]) -> _Refused | None:
        assert gs[0].w is not None
        try:
            _sync(ctx, gs[0].w, gs[0].issue, gs[0].run_id)
        except _Refused as r:
            return r
        return None

    if not groups:
        return
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        answers = list(pool.map(one, groups.values()))
    for gs, r in zip(groups.values(), answers, strict=True):
        if r is not None:
            for g in gs:
                refuse(g, r)
                going.remove(g)


def _claim_batch(
    ctx: FleetContext,
    going: list[_Going],
    issues: Mapping[int, Issue],
    refuse: Callable[[_Going, _Refused], None],
    out: dict[int, DispatchResult],
    *,
    began: float,
    size: int,
    baseline: str,
) -> None:
    """Checks 6 and 10 for the whole batch under ONE hold of the fleet lock: one probe, one page
    read for the last words (``issues`` are the fresh reads the checks passed on, by batch index),
    then the claims, at most ``CLAIMS_PER_WORKER`` at a time on each worker's one
    connection."""
    inv = ctx.inventory
    live_at: dict[int, float] = {}
    units: dict[int, Unit | None] = {}

    def start(g: _Going) -> None:
        w, view = g.w, g.view
        assert w is not None and view is not None
        env = {
            "PATH": view.path or "/usr/local/bin:/usr/bin:/bin",
            "FLEET_INVENTORY": inventory_arg(inv),
            "FLEET_RUN_ID": g.run_id,
            BASELINE_ENV: baseline,
            STATE_DIR_ENV: w.state_dir,  # where a death before the start marker is recorded
        }
        try:
            claim = ctx.supervisor(w).start(
                g.issue, runner_argv(ctx, w, g.issue, g.run_id), env=env, max_run_s=w.max_run_s
            )
            live_at[g.at] = time.monotonic()
            units[g.at] = _claimed(claim, w)
        except TransportError as exc:
            ctx.forget(w.name)
            # The start may have reached the worker before the connection broke (D20).
            refuse(
                g,
                _Refused(
                    10,
                    Exit.CLAIM_UNCONFIRMED,
                    f"worker {w.name}: the claim got no answer ({exc}); "
                    f"task-{g.issue} may be live there",
                    w.name,
                ),
            )
        except _Refused as r:
            refuse(g, r)

    t_lock = time.monotonic()
    try:
        with fleet_lock(ctx) as lock:
            t_probe = time.monotonic()
            views = probe_fleet(ctx, units_only=True)  # 8 and 4 ran for the batch already
            for g in list(going):
                assert g.w is not None
                try:
                    _no_live_run(ctx, views, g.issue, g.w)
                    assert g.view is not None
                    _canary_still_open(g.w, g.view, views)
                except _Refused as r:
                    refuse(g, r)
                    going.remove(g)
            reread = {g.issue: issues[g.at] for g in going if not _live_on(views, g.w, g.issue)}
            late = _relatched(ctx, reread) if reread else {}
            for g in [g for g in going if g.issue in late]:
                assert g.w is not None
                refuse(g, _Refused(6, Exit.LATCHED_UNDER_LOCK, late[g.issue], g.w.name))
                going.remove(g)
            lanes = [
                gs[i::CLAIMS_PER_WORKER]
                for gs in _by_worker(going).values()
                for i in range(min(len(gs), CLAIMS_PER_WORKER))
            ]
            if lanes:
                with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
                    list(pool.map(lambda lane: [start(g) for g in lane], lanes))
    except LockTimeout as exc:
        for g in going:
            refuse(g, _Refused(10, Exit.LOCK_TIMEOUT, str(exc)))
        return
    held, waited = lock.report.held_s or 0.0, lock.report.waited_s
    for g in going:
        if g.at in out:  # refused at its claim
            continue
        assert g.w is not None
        unit = units.get(g.at)
        timings = {
            "probe_to_live_s": live_at[g.at] - t_probe,
            "lock_held_s": held,
            "lock_wait_s": waited,
            "preflight_s": t_lock - began,  # the batch's checks before the lock, shared
            "batch": float(size),
        }
        started = f"start {unit.start_us} µs monotonic" if unit is not None else "started"
        out[g.at] = DispatchResult(
            g.issue,
            "launched",
            None,
            Exit.OK,
            started,
            g.w.name,
            unit_name(g.issue),
            g.run_id,
            timings,
        )
