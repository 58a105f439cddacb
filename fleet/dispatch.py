"""``dispatch(issue)``: the only path to a launch (D15). The sweeper, ``invoke dispatch`` and the
tests all call this function; a guard lives here or nowhere.

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

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.board.base import BoardError, BoardPage, BoardUnreadable
from fleet.context import FleetContext
from fleet.exits import Exit
from fleet.halt import read_halt_file
from fleet.inventory import WorkerConfig
from fleet.lock import FleetLock, LockTimeout, RemoteFleetLock
from fleet.markers import Kind, history, render
from fleet.model import CapacitySource, CIState, Issue, Reach, Unit, WorkerView
from fleet.observe import probe_fleet, probe_worker
from fleet.runner.capacity import describe
from fleet.select import (
    choose_worker,
    halt_line,
    healthy,
    issue_halts,
    live_load,
    marked_do_not_dispatch,
)
from fleet.sync import SyncState, parse_sync, sync_command
from fleet.transport import TransportError
from fleet.units import ClaimCode, unit_name

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


def _kill_switches(ctx: FleetContext, page: BoardPage) -> None:
    now = ctx.clock()
    halt = read_halt_file(Path(ctx.inventory.halt.file), now)
    if halt is not None:
        raise _Refused(0, Exit.HALTED_FILE, halt_line(halt, now))
    for h in issue_halts(page.issues, ctx.inventory.policy.halt_title):
        raise _Refused(0, Exit.HALTED_ISSUE, halt_line(h, now))
    state = Path(ctx.inventory.state_dir)
    if (state / "PAUSE").exists():
        raise _Refused(0, Exit.PAUSED, f"paused ({state / 'PAUSE'}): only cancels are decided")
    if (state / "DRAIN").exists():
        raise _Refused(0, Exit.DRAINING, f"draining ({state / 'DRAIN'}): no new work is started")


def _the_issue(ctx: FleetContext, number: int, dry_run: bool) -> Issue:
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
        h = history(issue, ctx.inventory.policy.identity)
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
    return issue


def _ci(ctx: FleetContext, ignore_ci: bool) -> None:
    try:
        state = ctx.board.ci_status()
    except BoardError as exc:  # a guard's own outage fails open (D5)
        ctx.warn(f"fleet: warning: CI status unreadable ({exc}); treated as not red")
        return
    if state is CIState.RED and not ignore_ci:  # 7
        raise _Refused(
            7,
            Exit.CI_RED,
            "CI on main is red (runs would inherit a broken baseline; --ignore-ci overrides)",
        )
    if state is CIState.UNKNOWN:
        ctx.warn("fleet: CI status unknown; unreadable CI is never treated as red")


def _choose(ctx: FleetContext, issue: Issue, wanted: str | None) -> WorkerConfig:
    if wanted is not None:
        w = ctx.worker(wanted)
        if w is None:
            raise _Refused(
                None, Exit.NO_SUCH_WORKER, f"no worker named {wanted!r} in the inventory"
            )
        return w
    views = probe_fleet(ctx)
    pool = healthy(views)
    if not pool:
        if any(v.reachable for v in views):
            raise _Refused(4, Exit.ALL_DARK, "every reachable worker is capacity-dark")
        raise _Refused(8, Exit.NONE_REACHABLE, "no worker is reachable")
    name, _why = choose_worker(issue, pool, live_load(views))  # the sweeper's own rule
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
    if view.reach is not Reach.OK:  # 8: three distinct codes; no token means nothing ran
        raise _Refused(
            8, _REACH_CODES[view.reach], f"worker {w.name}: {view.reach}: {view.detail}", w.name
        )
    if view.capacity is not None:  # 4: one remedy per source (D8)
        code = (
            Exit.DARK_REVOKED
            if view.capacity.source is CapacitySource.REVOKED
            else Exit.DARK_RATE_LIMIT
        )
        raise _Refused(4, code, f"worker {w.name} {describe(view.capacity, ctx.clock())}", w.name)
    return view


def _sync(ctx: FleetContext, w: WorkerConfig, issue: int, run_id: str) -> str:
    origin = str(ctx.inventory.board.origin) if ctx.inventory.board.origin else None
    cmd = sync_command(w.clone, origin=origin, note=f"run {run_id} of #{issue}")
    try:
        res = ctx.transport(w).run(cmd, timeout=SYNC_TIMEOUT_S)
        out = parse_sync(res.stdout)
    except TransportError as exc:
        ctx.forget(w.name)
        out = parse_sync(None)
        out = type(out)(out.state, f"{out.detail}: {exc}")
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
        str(ctx.inventory.path),
    ]


def _live(units: tuple[Unit, ...], issue: int) -> list[Unit]:
    return [u for u in units if u.issue == issue and u.live]


def _claim(
    ctx: FleetContext,
    w: WorkerConfig,
    view: WorkerView,
    issue: int,
    run_id: str,
    timings: dict[str, float],
) -> Unit | None:
    """Checks 6 and 10 under the fleet lock: probe every worker, then claim the name."""
    inv = ctx.inventory
    try:
        with fleet_lock(ctx) as lock:
            t_probe = time.monotonic()
            views = probe_fleet(ctx)
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
            env = {
                "PATH": view.path or "/usr/local/bin:/usr/bin:/bin",
                "FLEET_INVENTORY": str(inv.path),
                "FLEET_RUN_ID": run_id,
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
        if page is None:
            try:
                page = ctx.board.read()
            except BoardUnreadable as exc:
                raise _Refused(1, Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
        _kill_switches(ctx, page)
        the = _the_issue(ctx, issue, dry_run)
        _ci(ctx, ignore_ci)
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
        unit = _claim(ctx, w, view, issue, run_id, timings)
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
