"""Observe: read the board once and probe the fleet once into a frozen Snapshot (seed 001, step 1).

Each worker is probed in parallel: check 8's three-token reach probe, the worker's PATH, the
capacity file and the supervisor's unit list, in ONE round trip per worker once this command knows
the worker's supervisor. The first probe of a worker in a command learns it: an ``auto`` worker's
systemd detection (a read, nothing more) rides in the reach round trip, and the supervisor's own
probe follows once the worker has answered, so nothing is installed on a worker that cannot be
reached.
The fold matters because the dispatch path probes the whole fleet under the fleet lock for every
launch (D4): each round trip saved there is saved once per launch (docs/performance.md). A worker
that cannot be probed is UNREACHABLE with the reason — could-not-check, never "no units" (D20) — and
a reaper must not read its silence as absence.

Check 8's runner test starts the worker's interpreter, most of a local probe's cost. Local workers
of one command that name the same interpreter and the same PATH repair ask it the same question on
the same box, so it is asked once per such group: the first worker's probe runs it and the others'
probes carry its answer (:func:`probe_fleet`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

from fleet.board.base import BoardPage, BoardUnreadable
from fleet.context import FleetContext
from fleet.control.switches import read_halt_file
from fleet.core.canary import canary_open
from fleet.core.model import (
    Capacity,
    CapacitySource,
    Reach,
    Snapshot,
    SupervisorKind,
    TransportKind,
    Unit,
    WorkerView,
)
from fleet.inventory import WorkerConfig
from fleet.runner.capacity import CAPACITY_FILE, parse_capacity
from fleet.runner.prestart import DEATHS_FILE, parse_deaths
from fleet.transport import RunResult, TransportError, parse_reach, reach_command, remote_path
from fleet.units import (
    PortableSupervisor,
    Supervisor,
    SupervisorError,
    SystemdSupervisor,
    detect_command,
)
from fleet.units import portable as portable_units
from fleet.units import systemd as systemd_units
from fleet.units.choose import DETECT_TIMEOUT_S

_PATH_MARK = "fleet-path:"  # the worker's repaired PATH follows on the same line
_CAPACITY_MARK = "fleet-capacity:"  # the line after which the worker's capacity file follows
# One probe may not hang a sweep: a worker that does not answer in this long is unreachable.
# 15 s is 100x the measured cold SSH connect (docs/facts.md: ~120-180 ms).
PROBE_TIMEOUT_S = 15.0
# The folded probe also lists units or detects systemd: the larger of their own bounds (30 s).
FOLDED_PROBE_TIMEOUT_S = max(PROBE_TIMEOUT_S, systemd_units.PROBE_TIMEOUT_S, DETECT_TIMEOUT_S)
_UNITS_MARK = "fleet-units:"  # the supervisor's probe output follows, up to the end line
_UNITS_END = "fleet-units-end rc="  # its exit status follows on the same line
_DEATHS_MARK = "fleet-launch-deaths:"  # the worker's launch-death records follow (runner.prestart)
_SYSTEMD_MARK = "fleet-systemd:"  # an auto worker's detection: yes (a user manager answers) or no


def runner_check(w: WorkerConfig) -> str:
    """Check 8's "runner present": the worker's interpreter can import the runner."""
    # find_spec imports only the (empty) parent packages: a cheap "runner installed" test.
    code = "import importlib.util as u, sys; sys.exit(u.find_spec('fleet.runner.run') is None)"
    return f"{shlex.quote(w.python)} -c {shlex.quote(code)}"


def probe_command(
    w: WorkerConfig,
    *,
    units: str | None = None,
    runner_ok: bool | None = None,
    detect: bool = False,
) -> str:
    """Check 8's reach probe, the PATH, then (``detect``) whether systemd answers for an ``auto``
    worker, then (folded) ``units`` — a supervisor's probe command, run in a subshell so its own
    ``exit`` ends only itself — then the capacity file. Exits 0.

    ``runner_ok``: the runner test's answer, already given by this box for the same interpreter
    and PATH (:func:`runner_group`); the probe then reports it instead of asking again."""
    cap = f"{remote_path(w.state_dir)}/{CAPACITY_FILE}"
    deaths = f"{remote_path(w.state_dir)}/{DEATHS_FILE}"
    folded = (
        f"echo {_UNITS_MARK}; ( {units}\n); fleet_units_rc=$?; "
        f'echo; echo "{_UNITS_END}$fleet_units_rc"; '
        if units
        else ""
    )
    runner = runner_check(w) if runner_ok is None else ("true" if runner_ok else "false")
    detection = (
        f"if {detect_command()}; then echo {_SYSTEMD_MARK}yes; else echo {_SYSTEMD_MARK}no; fi; "
        if detect
        else ""
    )
    return (
        reach_command(state_dir=w.state_dir, runner_check=runner)
        + f'echo "{_PATH_MARK}$PATH"; '
        + detection
        + folded
        + f"echo {_DEATHS_MARK}; cat -- {deaths} 2>/dev/null; echo; "
        + f"echo {_CAPACITY_MARK}; cat -- {cap} 2>/dev/null; exit 0"
    )


def split_units(head: str, stderr: str = "") -> RunResult:
    """The folded supervisor probe's own output and exit status, cut out of the probe's output
    before the capacity mark. Missing marks read as a probe that printed nothing and failed, which
    every supervisor parser turns into SupervisorError (could-not-check, D20). Pure."""
    lines = head.splitlines()
    try:
        start = lines.index(_UNITS_MARK)
    except ValueError:
        return RunResult(-1, "", stderr)
    for i in range(len(lines) - 1, start, -1):
        rc = lines[i].removeprefix(_UNITS_END)
        if rc != lines[i] and rc.lstrip("-").isdigit():
            return RunResult(int(rc), "\n".join(lines[start + 1 : i]) + "\n", stderr)
    return RunResult(-1, "", stderr)


UnitParser = Callable[[RunResult], tuple[Unit, ...]]


def folded_unit_probe(sup: Supervisor) -> tuple[str, UnitParser] | None:
    """A supervisor's unit probe as (command, parser), to ride in the reach round trip; None for a
    supervisor of a kind not known here, which then probes in its own round trip."""
    if isinstance(sup, SystemdSupervisor):
        worker, master = sup.worker, sup.master
        return systemd_units.build_probe_command(), lambda r: systemd_units.parse_probe(
            r, worker=worker, master=master
        )
    if isinstance(sup, PortableSupervisor):
        worker, master = sup.worker, sup.master
        command = portable_units.build_probe_command(python=sup.python, state_dir=sup.state_dir)
        return command, lambda r: portable_units.parse_probe(r, worker=worker, master=master)
    return None


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


def split_detection(head: str) -> SupervisorKind | None:
    """The supervisor an ``auto`` worker's folded detection chose, or None when the probe carried
    none (the caller then detects in a round trip of its own). Pure."""
    for line in head.splitlines():
        if line.startswith(_SYSTEMD_MARK):
            answer = line[len(_SYSTEMD_MARK) :].strip()
            return SupervisorKind.SYSTEMD if answer == "yes" else SupervisorKind.PORTABLE
    return None


def split_deaths(head: str) -> str:
    """The launch-death file's text: every line after its mark in the head of the probe. Pure."""
    _before, sep, after = head.partition(_DEATHS_MARK + "\n")
    return after if sep else ""


def probe_worker(
    ctx: FleetContext, w: WorkerConfig, *, runner_ok: bool | None = None
) -> tuple[WorkerView, list[str]]:
    """One worker as this cycle sees it, and the warnings the probe produced (fail-open notes).
    ``runner_ok``: check 8's runner answer already given for this worker's group (see
    :func:`probe_command`); None asks the worker."""
    warnings: list[str] = []
    known = ctx.known_supervisor(w.name)
    fold = folded_unit_probe(known) if known is not None else None
    detect = known is None and w.supervisor is SupervisorKind.AUTO
    command = probe_command(w, units=fold[0] if fold else None, runner_ok=runner_ok, detect=detect)
    try:
        timeout = FOLDED_PROBE_TIMEOUT_S if fold or detect else PROBE_TIMEOUT_S
        result = ctx.transport(w).run(command, timeout=timeout)
    except TransportError as exc:
        ctx.forget(w.name)
        return WorkerView(w.name, w.lane, Reach.UNREACHABLE, detail=str(exc)), warnings
    reach, why = parse_reach(result)
    if reach is not Reach.OK:
        return WorkerView(w.name, w.lane, reach, detail=why), warnings
    head, path, cap_text = split_probe(result.stdout)
    capacity: Capacity | None = None
    if cap_text is not None:
        capacity, warning = parse_capacity(
            cap_text, where=f"{w.name}:{w.state_dir}/{CAPACITY_FILE}"
        )
        if warning:
            warnings.append(warning)
        # D8 property 3: a clock clears a rate limit (never a revocation). Past its stated reset
        # the worker takes work again; the file stays until that work's clean run deletes it.
        if (
            capacity is not None
            and capacity.source is CapacitySource.RATE_LIMIT
            and capacity.reset_at is not None
            and capacity.reset_at <= ctx.clock()
        ):
            capacity = None
    try:
        if fold is not None:
            units = fold[1](split_units(head, result.stderr))
        else:
            detected = split_detection(head) if detect else None
            units = ctx.supervisor(w, kind=detected).probe()
    except (SupervisorError, TransportError) as exc:
        ctx.forget(w.name)
        return WorkerView(
            w.name, w.lane, Reach.UNREACHABLE, capacity, detail=f"unit probe failed: {exc}"
        ), warnings
    canary = canary_open(capacity, units, ctx.clock())  # one probe run on an unknown reset (D8)
    deaths, bad = parse_deaths(split_deaths(head), worker=w.name)
    warnings += bad
    view = WorkerView(
        w.name, w.lane, Reach.OK, capacity, tuple(units), path=path, canary=canary, deaths=deaths
    )
    return view, warnings


def probe_units(ctx: FleetContext, w: WorkerConfig) -> tuple[WorkerView, list[str]]:
    """Only the worker's unit list, when this command knows its supervisor: the view's reach is OK
    when the list was read, UNREACHABLE when it could not be (D20); no PATH, no capacity, no
    check 8. A worker met for the first time gets the whole :func:`probe_worker`."""
    sup = ctx.known_supervisor(w.name)
    if sup is None:
        return probe_worker(ctx, w)
    try:
        units = sup.probe()
    except (SupervisorError, TransportError) as exc:
        ctx.forget(w.name)
        return WorkerView(w.name, w.lane, Reach.UNREACHABLE, detail=f"unit probe failed: {exc}"), []
    return WorkerView(w.name, w.lane, Reach.OK, None, tuple(units)), []


def runner_group(ctx: FleetContext, w: WorkerConfig) -> tuple[str, tuple[str, ...]] | None:
    """The key of the workers whose runner test is one question: local workers carried by this
    command's own local transport, with the same interpreter and PATH repair (the same command
    in the same environment on the same box). None: the worker answers for itself (an ssh worker
    is another box; a transport the context was given may be anything)."""
    if w.transport is not TransportKind.LOCAL or ctx.transport_factory is not None:
        return None
    return (w.python, w.path_prefix)


Probed = tuple[WorkerView, list[str]]
T = TypeVar("T")


def _in_parallel(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run the probes at once, one thread each (they wait on processes and sockets)."""
    if len(calls) == 1:
        return [calls[0]()]
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def _probe_group(ctx: FleetContext, group: list[WorkerConfig]) -> list[Probed]:
    """The first worker asks the runner test, then the others probe at once carrying its answer.
    Only a probe that ran the test has one (OK or NO_RUNNER): after a permission failure or a
    transport error each of the others asks for itself."""
    first = probe_worker(ctx, group[0])
    reach = first[0].reach
    answer = reach is Reach.OK if reach in (Reach.OK, Reach.NO_RUNNER) else None
    rest = [partial(probe_worker, ctx, w, runner_ok=answer) for w in group[1:]]
    return [first, *(_in_parallel(rest) if rest else [])]


def probe_fleet(
    ctx: FleetContext,
    workers: tuple[WorkerConfig, ...] | None = None,
    *,
    units_only: bool = False,
) -> tuple[WorkerView, ...]:
    """Probe every worker in parallel (I/O-bound: one thread per worker, bounded by the fleet);
    the local workers of one runner test (:func:`runner_group`) once its first has asked it.

    ``units_only``: :func:`probe_units` — for a duplicate check under the fleet lock whose checks 8
    and 4 already ran; the runner check alone is most of a full probe's worker CPU (~30 of ~54 ms
    measured on the harness)."""
    todo = workers if workers is not None else ctx.inventory.workers
    if not todo:
        return ()
    groups: dict[object, list[int]] = {}
    for i, w in enumerate(todo):
        key = None if units_only else runner_group(ctx, w)
        groups.setdefault(i if key is None else key, []).append(i)
    probe = probe_units if units_only else probe_worker

    def one(members: list[int]) -> list[Probed]:
        if len(members) == 1:
            return [probe(ctx, todo[members[0]])]
        return _probe_group(ctx, [todo[i] for i in members])

    answered = _in_parallel([partial(one, members) for members in groups.values()])
    by_index: dict[int, Probed] = {}
    for members, probed in zip(groups.values(), answered, strict=True):
        by_index.update(zip(members, probed, strict=True))
    results = [by_index[i] for i in range(len(todo))]
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
