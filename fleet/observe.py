"""Observe: read the board once and probe the fleet once into a frozen Snapshot (seed 001, step 1).

Each worker is probed in parallel: check 8's three-token reach probe and the capacity file in one
round trip, then the supervisor's unit list. A worker that cannot be probed is UNREACHABLE with the
reason — could-not-check, never "no units" (D20) — and a reaper must not read its silence as absence.
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fleet.board.base import BoardPage, BoardUnreadable
from fleet.context import FleetContext
from fleet.halt import read_halt_file
from fleet.inventory import WorkerConfig
from fleet.model import Capacity, Reach, Snapshot, WorkerView
from fleet.runner.capacity import CAPACITY_FILE, parse_capacity
from fleet.transport import TransportError, parse_reach, reach_command, remote_path
from fleet.units import SupervisorError

_PATH_MARK = "fleet-path:"  # the worker's repaired PATH follows on the same line
_CAPACITY_MARK = "fleet-capacity:"  # the line after which the worker's capacity file follows
# One probe may not hang a sweep: a worker that does not answer in this long is unreachable.
# 15 s is 100x the measured cold SSH connect (ssh-lock-facts.md: ~120-180 ms).
PROBE_TIMEOUT_S = 15.0


def runner_check(w: WorkerConfig) -> str:
    """Check 8's "runner present": the worker's interpreter can import the runner."""
    # find_spec imports only the (empty) parent packages: a cheap "runner installed" test.
    code = "import importlib.util as u, sys; sys.exit(u.find_spec('fleet.runner.run') is None)"
    return f"{shlex.quote(w.python)} -c {shlex.quote(code)}"


def probe_command(w: WorkerConfig) -> str:
    cap = f"{remote_path(w.state_dir)}/{CAPACITY_FILE}"
    return (
        reach_command(state_dir=w.state_dir, runner_check=runner_check(w))
        + f'echo "{_PATH_MARK}$PATH"; echo {_CAPACITY_MARK}; cat -- {cap} 2>/dev/null; exit 0'
    )


def split_probe(stdout: str) -> tuple[str, str, str | None]:
    """(the reach part, the worker's PATH, the capacity file's text or None when absent). Pure."""
    head, sep, tail = stdout.partition(_CAPACITY_MARK + "\n")
    if not sep:
        head, sep, tail = stdout.partition(_CAPACITY_MARK)
    path = ""
    for line in head.splitlines():
        if line.startswith(_PATH_MARK):
            path = line[len(_PATH_MARK) :].strip()
    text = tail.strip()
    return head, path, (text or None)


def probe_worker(ctx: FleetContext, w: WorkerConfig) -> tuple[WorkerView, list[str]]:
    """One worker as this cycle sees it, and the warnings the probe produced (fail-open notes)."""
    warnings: list[str] = []
    try:
        result = ctx.transport(w).run(probe_command(w), timeout=PROBE_TIMEOUT_S)
    except TransportError as exc:
        ctx.forget(w.name)
        return WorkerView(w.name, w.lane, Reach.UNREACHABLE, detail=str(exc)), warnings
    reach, why = parse_reach(result)
    if reach is not Reach.OK:
        return WorkerView(w.name, w.lane, reach, detail=why), warnings
    _, path, cap_text = split_probe(result.stdout)
    capacity: Capacity | None = None
    if cap_text is not None:
        capacity, warning = parse_capacity(
            cap_text, where=f"{w.name}:{w.state_dir}/{CAPACITY_FILE}"
        )
        if warning:
            warnings.append(warning)
    try:
        units = ctx.supervisor(w).probe()
    except (SupervisorError, TransportError) as exc:
        ctx.forget(w.name)
        return WorkerView(
            w.name, w.lane, Reach.UNREACHABLE, capacity, detail=f"unit probe failed: {exc}"
        ), warnings
    return WorkerView(w.name, w.lane, Reach.OK, capacity, tuple(units), path=path), warnings


def probe_fleet(
    ctx: FleetContext, workers: tuple[WorkerConfig, ...] | None = None
) -> tuple[WorkerView, ...]:
    """Probe every worker in parallel (I/O-bound: one thread per worker, bounded by the fleet)."""
    todo = workers if workers is not None else ctx.inventory.workers
    if not todo:
        return ()
    with ThreadPoolExecutor(max_workers=len(todo)) as pool:
        results = list(pool.map(lambda w: probe_worker(ctx, w), todo))
    for _, warnings in results:
        for line in warnings:
            ctx.warn(f"fleet: {line}")
    return tuple(view for view, _ in results)


def read_page(ctx: FleetContext) -> tuple[BoardPage | None, str | None]:
    try:
        return ctx.board.read(), None
    except BoardUnreadable as exc:
        return None, str(exc)


def snapshot(ctx: FleetContext, *, page: BoardPage | None = None) -> Snapshot:
    """Freeze one cycle: the board page, the fleet probe, the halt file, and now."""
    now = ctx.clock()
    error = None
    if page is None:
        page, error = read_page(ctx)
    workers = probe_fleet(ctx)
    halt = read_halt_file(Path(ctx.inventory.halt.file), now)
    return Snapshot(
        now=now,
        issues=page.issues if page is not None else (),
        workers=workers,
        policy=ctx.inventory.policy,
        halts=(halt,) if halt is not None else (),
        board_error=error,
    )
