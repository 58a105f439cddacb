"""Seed 003's pre-flight checks, each a function that answers with a value: what it found, or the
:class:`~fleet.dispatch.result.Refusal` that stops the request. None of them decides the order:
``fleet.dispatch.path`` runs them in the seed's order, for one request or a batch alike (D15).

Only check 3 writes to the board (its notice, once); every other refusal leaves no mark for a run
that never started (D6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from fleet.board.base import BoardError, BoardPage, BoardUnreadable
from fleet.context import FleetContext
from fleet.control.switches import read_halt_file, read_switches
from fleet.core.exits import Exit
from fleet.core.last_word import latched_since
from fleet.core.markers import Kind, history, render
from fleet.core.model import (
    CapacitySource,
    CIState,
    Issue,
    Reach,
    Unit,
    WaitState,
    WorkerView,
    unit_name,
)
from fleet.core.origin import target_origins
from fleet.core.select import (
    choose_worker,
    fresh_hold,
    halt_line,
    healthy,
    issue_halts,
    marked_do_not_dispatch,
)
from fleet.core.sync import SyncState, parse_sync, sync_command
from fleet.inventory import WorkerConfig
from fleet.runner.capacity import describe
from fleet.transport import TransportError
from fleet.units import Claim, ClaimCode

from .result import Refusal

# Check 9 may fetch a large repository: bounded so one slow worker cannot hold a sweep.
SYNC_TIMEOUT_S = 120.0

_HOLD_CODES = {6: Exit.LATCHED, 7: Exit.EXHAUSTED, 8: Exit.MARKER_PARKED, 12: Exit.UNAPPROVED}
_REACH_CODES = {
    Reach.UNREACHABLE: Exit.UNREACHABLE,
    Reach.NO_PERMISSION: Exit.NO_PERMISSION,
    Reach.NO_RUNNER: Exit.NO_RUNNER,
}
_CLAIM_CODES = {ClaimCode.HELD_LIVE: Exit.HELD_LIVE, ClaimCode.HELD_FINISHED: Exit.HELD_FINISHED}


def kill_switches(ctx: FleetContext, page: BoardPage | None) -> BoardPage | Refusal:
    """The file switches before anything reaches the network, then the board read the halt issue
    needs (the sweeper's page when it passed one: zero extra calls), before any worker is probed."""
    now = ctx.clock()
    switches = read_switches(ctx.inventory)
    halt = read_halt_file(Path(switches.halt_file.path), now) if switches.halt_file else None
    if halt is not None:
        return Refusal(0, Exit.HALTED_FILE, halt_line(halt, now))
    if switches.pause is not None:
        return Refusal(0, Exit.PAUSED, f"paused ({switches.pause.path}): only cancels are decided")
    if switches.drain is not None:
        return Refusal(
            0, Exit.DRAINING, f"draining ({switches.drain.path}): no new work is started"
        )
    if page is None:
        try:
            page = ctx.board.read()
        except BoardUnreadable as exc:
            return Refusal(1, Exit.BOARD_UNREADABLE, f"board unreadable: {exc}")
    for h in issue_halts(page.issues, ctx.inventory.policy):
        return Refusal(0, Exit.HALTED_ISSUE, halt_line(h, now))
    return page


def fresh_issue(ctx: FleetContext, number: int, *, dry_run: bool, recheck: bool) -> Issue | Refusal:
    """Checks 1, 2, 3 and 5 on a fresh read, never the sweeper's page: the page is up to a cycle
    old, and an issue closed 46 s before a run started is what checks 1 and 2 exist for (seed 003).

    ``recheck``: the sweeper's page may be a cycle old, and on GitHub a flood of comments can push
    markers out of its window, so a scheduled dispatch re-asks predicates 12 and 6-8 of this read.
    A hand dispatch is the operator's override of the scheduler's predicates."""
    try:
        issue = ctx.board.issue(number)
    except BoardError as exc:
        return Refusal(1, Exit.BOARD_UNREADABLE, f"board unreadable: {exc}")
    if issue is None:  # 1
        return Refusal(1, Exit.ISSUE_MISSING, f"issue #{number} does not exist")
    if not issue.is_open:  # 2: silent — a marker would latch a later reopen
        return Refusal(2, Exit.ISSUE_CLOSED, f"issue #{number} is closed")
    dnd = ctx.inventory.policy.do_not_dispatch
    if marked_do_not_dispatch(issue.title, dnd):  # 3: a permanent property, so it comments
        return _do_not_dispatch(ctx, issue, dry_run)
    if issue.open_blockers:  # 5
        refs = ", ".join(f"#{b}" for b in issue.open_blockers)
        return Refusal(5, Exit.BLOCKED, f"blocked by {refs} (open)")
    held = fresh_hold(issue, ctx.inventory.policy, ctx.clock()) if recheck else None
    if held is not None:  # not a pre-flight check of the seed's: named by predicate and code
        reason = f"predicate {held.predicate} ({held.state}) on the fresh read: {held.reason}"
        code = (
            Exit.CAPACITY_LOOP
            if held.state == WaitState.CAPACITY_LOOP
            else _HOLD_CODES[held.predicate]
        )
        return Refusal(None, code, reason)
    return issue


def _do_not_dispatch(ctx: FleetContext, issue: Issue, dry_run: bool) -> Refusal:
    """Check 3's refusal, with its notice posted once (never by a dry run)."""
    dnd = ctx.inventory.policy.do_not_dispatch
    h = history(issue, ctx.inventory.policy)
    if not dry_run and h.last_of(Kind.DO_NOT_DISPATCH) is None:
        note = f"The title carries {dnd}; fleet will not dispatch this issue."
        try:
            ctx.board.comment(issue.number, render(Kind.DO_NOT_DISPATCH, {}, note))
        except BoardError as exc:
            why = f"title marked {dnd}; its notice was not posted: {exc}"
            return Refusal(3, Exit.WRITE_FAILED, why)
    return Refusal(3, Exit.DO_NOT_DISPATCH, f"title marked {dnd}")


def ci_baseline(ctx: FleetContext, ignore_ci: bool) -> str:
    """Check 7, advisory (seed 003): the baseline this run starts on — ``green``, ``red`` or
    ``unknown`` — recorded in its start marker, never a refusal. A red ``main`` refused every
    dispatch before, the issue that would fix CI included; and a run on a red baseline spends no
    attempt when it fails (``fleet.core.markers.history``), because the failure may be the baseline's."""
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


def named_worker(ctx: FleetContext, name: str) -> WorkerConfig | Refusal:
    w = ctx.worker(name)
    if w is None:
        return Refusal(None, Exit.NO_SUCH_WORKER, f"no worker named {name!r} in the inventory")
    return w


def pick(
    ctx: FleetContext, issue: Issue, views: tuple[WorkerView, ...], load: dict[str, int]
) -> WorkerConfig | Refusal:
    """Checks 8 and 4 for a request that names no worker: the sweeper's own choice among the
    healthy (``choose_worker``), or the fleet-wide refusal when there is none."""
    pool = healthy(views)
    if not pool:
        if any(v.reachable for v in views):
            return Refusal(4, Exit.ALL_DARK, "every reachable worker is capacity-dark")
        return Refusal(8, Exit.NONE_REACHABLE, "no worker is reachable")
    name, _why = choose_worker(issue, pool, load)
    w = ctx.worker(name)
    assert w is not None  # the probe reports inventory workers only
    return w


def usable(ctx: FleetContext, w: WorkerConfig, view: WorkerView) -> Refusal | None:
    """Checks 8 and 4 on one probe's answer for ``w``."""
    if view.reach is not Reach.OK:  # 8: three distinct codes; no token means nothing ran
        code = _REACH_CODES[view.reach]
        return Refusal(8, code, f"worker {w.name}: {view.reach}: {view.detail}", w.name)
    if view.capacity is not None and view.dark:  # 4: one remedy per source (D8)
        revoked = view.capacity.source is CapacitySource.REVOKED
        code = Exit.DARK_REVOKED if revoked else Exit.DARK_RATE_LIMIT
        return Refusal(4, code, f"worker {w.name} {describe(view.capacity, ctx.clock())}", w.name)
    return None


def canary_taken(views: tuple[WorkerView, ...], name: str) -> tuple[WorkerView, ...]:
    """The views once worker ``name``'s one canary run is spoken for: dark again for the rest."""
    return tuple(replace(v, canary=False) if v.name == name else v for v in views)


def canary_still_open(
    w: WorkerConfig, view: WorkerView, views: tuple[WorkerView, ...]
) -> Refusal | None:
    """Check 4 again under the fleet lock, for a canary only: its one run goes only while the
    worker has no live unit, so two dispatchers that both saw the canary open send one (D8)."""
    if not view.canary:
        return None
    live = [u.name for v in views if v.name == w.name for u in v.units if u.live]
    if not live:
        return None
    why = (
        f"worker {w.name} dark: rate limit, reset unknown; its one canary run is taken "
        f"({', '.join(live)} live)"
    )
    return Refusal(4, Exit.DARK_RATE_LIMIT, why, w.name)


def sync_clone(ctx: FleetContext, w: WorkerConfig, issue: int, run_id: str) -> Refusal | None:
    """Check 9: the worker's clone at a fresh ``main`` (dirty work stashed, never discarded), from
    the inventory's origin and no other."""
    origin = str(ctx.inventory.board.origin) if ctx.inventory.board.origin else None
    accept = target_origins(ctx.inventory.board)
    cmd = sync_command(w.clone, origin=origin, note=f"run {run_id} of #{issue}", accept=accept)
    try:
        out = parse_sync(ctx.transport(w).run(cmd, timeout=SYNC_TIMEOUT_S).stdout)
    except TransportError as exc:
        ctx.forget(w.name)
        out = parse_sync(None)
        out = type(out)(out.state, f"{out.detail}: {exc}")
    where = f"worker {w.name} clone {w.clone}"
    if out.state is SyncState.FOREIGN_ORIGIN:  # an agent may have rewritten .git/config
        why = f"{where}: origin is {out.detail}, the inventory names {accept.describe()}"
        return Refusal(9, Exit.CLONE_FOREIGN_ORIGIN, why, w.name)
    if not out.synced:
        return Refusal(9, Exit.CLONE_UNSYNCED, f"{where}: {out.detail}", w.name)
    if out.state is SyncState.STASHED:
        ctx.warn(
            f"fleet: worker {w.name}: dirty clone {w.clone} stashed before the run (git stash list there)"
        )
    return None


def live(units: tuple[Unit, ...], issue: int) -> list[Unit]:
    return [u for u in units if u.issue == issue and u.live]


def live_on(views: tuple[WorkerView, ...], w: WorkerConfig, issue: int) -> bool:
    """A live unit of ``issue`` on the dispatching worker itself: the name claim (check 10) then
    refuses with the more specific answer, the unit it found."""
    return any(v.name == w.name and live(v.units, issue) for v in views)


def no_live_run(
    ctx: FleetContext, views: tuple[WorkerView, ...], issue: int, w: WorkerConfig
) -> Refusal | None:
    """Check 6 on a probe taken under the fleet lock: no live ``task-N`` on another worker or
    master. The dispatching worker's own unit is check 10's to name."""
    for v in views:
        if not v.reachable:  # could-not-check is not "no unit": say so, proceed (D5)
            ctx.warn(
                f"fleet: warning: worker {v.name} could not be probed for #{issue} "
                f"({v.detail}); proceeding on the rest of the fleet"
            )
            continue
        found = live(v.units, issue)
        if found and v.name != w.name:
            why = f"{unit_name(issue)} is live on {v.name} (master {found[0].master})"
            return Refusal(6, Exit.HELD_OTHER_WORKER, why, v.name)
    return None


def relatched(ctx: FleetContext, before: Mapping[int, Issue]) -> dict[int, str]:
    """The last word of each issue re-read inside the lock hold (``fleet.core.last_word``), by issue:
    why it latches now. One issue read for one request, one page read for a batch. Its own outage
    fails open (D5): every check already passed on a fresh read."""
    if not before:
        return {}
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


def claimed(claim: Claim, w: WorkerConfig) -> Unit | Refusal | None:
    """Check 10's answer: the launched unit (None when the supervisor named none), or the refusal
    with the claim's own code."""
    if claim.code is ClaimCode.LAUNCHED:
        return claim.unit
    code = _CLAIM_CODES.get(claim.code, Exit.SUPERVISOR_FAILED)
    return Refusal(10, code, f"worker {w.name}: {claim.code}: {claim.detail}", w.name)
