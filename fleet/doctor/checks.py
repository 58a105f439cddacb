"""The doctor's checks that touch the world, in a registry. Each check takes the open context and
yields findings; a check that raises is itself a failure, named after it, never a crash.

Add a check from another module with :func:`register` (and import that module in
:data:`MODULES`), e.g. the agent-credential check of ``trust-agent``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from fleet.board import check_identity, open_board
from fleet.board.base import BoardError, BoardUnreadable, IdentityMismatch, LabelsDropped
from fleet.context import FleetContext
from fleet.core.model import Reach, StateReason, Status, SupervisorKind
from fleet.doctor import worker as wscript
from fleet.doctor.model import Finding, failed, passed
from fleet.inventory import InventoryError, WorkerConfig, load
from fleet.observe import probe_fleet
from fleet.transport import TransportError
from fleet.units import SystemdSupervisor

Check = Callable[[FleetContext, "Options"], Iterable[Finding]]
REGISTRY: list[tuple[str, Check]] = []
# Checks that need no board (the workers): they run even when the board cannot be opened, so one
# doctor run names every broken piece, not the first.
BOARDLESS: set[str] = set()
MODULES: tuple[str, ...] = ("fleet.doctor.agent_cred",)  # further modules registering checks
# One worker's script: ls-remote's bound twice over, plus the SSH round trip.
WORKER_TIMEOUT_S = 2 * wscript.LS_REMOTE_TIMEOUT_S + 15
PROBE_TITLE = "fleet doctor probe: throwaway, closed at once"


class Options:
    """What the operator asked of this doctor run."""

    def __init__(self, *, probe: bool = True) -> None:
        self.probe = probe  # file (and close) one fixture-labelled issue to prove writes work


def register(name: str, *, needs_board: bool = True) -> Callable[[Check], Check]:
    def add(fn: Check) -> Check:
        REGISTRY.append((name, fn))
        if not needs_board:
            BOARDLESS.add(name)
        return fn

    return add


class _NoBoard:
    """The board a boardless check runs beside when the real one could not be opened: any use
    of it is that check's bug, reported as such (``check-crashed``), never a silent answer."""

    identity = ""

    def __getattr__(self, name: str) -> Any:
        raise BoardUnreadable(f"the board could not be opened (a boardless check used {name!r})")


def run(inventory_path: str | None, default: Path, options: Options) -> list[Finding]:
    """Every check, in order. Without a loadable inventory nothing else can be checked."""
    path = Path(inventory_path) if inventory_path else default
    try:
        inv = load(path)
    except (InventoryError, OSError) as exc:
        return [failed("inventory", "inventory-invalid", str(exc),
                       "fix the file at the position shown (or set FLEET_INVENTORY)")]  # fmt: skip
    out = [passed("inventory", f"{inv.path} loads: {len(inv.workers)} worker(s), board "
                  f"{inv.board.kind}")]  # fmt: skip
    out += list(
        _paths(inv.state_dir, inv.halt.file, inv.lock.path if inv.lock.host is None else None)
    )
    board: Any
    try:
        board = open_board(inv)
    except BoardError as exc:
        out.append(failed("board", "board-unopenable", str(exc),
                          "fix board: in the inventory (docs/github.md for GitHub)"))  # fmt: skip
        board = None
    for module in MODULES:
        importlib.import_module(module)
    with FleetContext(inv, board if board is not None else _NoBoard()) as ctx:
        for name, check in REGISTRY:
            if board is None and name not in BOARDLESS:
                continue
            try:
                out += list(check(ctx, options))
            except Exception as exc:  # a broken check is a failure with its name, not a crash
                out.append(failed(name, "check-crashed", f"{type(exc).__name__}: {exc}",
                                  "a bug in the doctor: report it with this line"))  # fmt: skip
    return out


def _writable(check: str, path: Path) -> Finding:
    """Whether ``path`` (a directory that may not exist yet) can be created and written, without
    writing: the nearest existing ancestor must be a writable directory."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return passed(check, f"{path} is writable")
    return failed(check, "path-not-writable", f"{path}: {probe} is not a writable directory",
                  f"create {path} and make it writable by this user")  # fmt: skip


def _paths(state_dir: Path, halt_file: Path, lock: Path | None) -> Iterator[Finding]:
    yield _writable("state dir", state_dir)
    yield _writable("halt file's directory", halt_file.parent)
    if lock is not None:
        yield _writable("lock file's directory", lock.parent)


@register("board")
def board_answers(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    try:
        page = ctx.board.read()
    except BoardError as exc:
        yield failed("board: read", "board-unreadable", str(exc),
                     "see docs/github.md (token permissions, project number, SSO)")  # fmt: skip
        return
    unit = f" {page.cost_unit}" if page.cost_unit else ""
    yield passed(
        "board: read", f"{len(page.issues)} open issue(s), this read cost {page.cost}{unit}"
    )
    if page.skipped:
        yield failed("board: every item readable", "items-unreadable",
                     f"{len(page.skipped)} item(s) skipped: "
                     + ", ".join(sorted({s.reason for s in page.skipped})),
                     "give the token the item's repository, or authorise it for the "
                     "organisation's SAML SSO")  # fmt: skip


@register("board: identity")
def identity(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    if not callable(getattr(ctx.board, "check_identity", None)):
        yield passed("board: identity", f"the embedded board writes as {ctx.board.identity!r}")
        return
    try:
        check_identity(ctx.board)
    except IdentityMismatch as exc:
        yield failed("board: identity", "login-differs", str(exc),
                     "set board.identity to the token's login, or use that login's token")  # fmt: skip
    except BoardError as exc:
        yield failed("board: identity", "login-unreadable", str(exc), "check the token")
    else:
        yield passed("board: identity", f"the token is {ctx.board.identity!r}")


@register("board: fields")
def fields(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    options_of = getattr(ctx.board, "field_options", None)
    gh = ctx.inventory.board.github
    if not callable(options_of) or gh is None:
        yield passed("board: Status field", "the embedded board has Status built in")
        return
    try:
        status = options_of(gh.status_field)
    except BoardError as exc:
        yield failed("board: Status field", "fields-unreadable", str(exc),
                     "the token needs read access to the project (docs/github.md)")  # fmt: skip
        return
    if status is None:
        yield failed("board: Status field", "field-missing", f"no field {gh.status_field!r}",
                     f"add a single-select field {gh.status_field!r} to the project")  # fmt: skip
    else:
        kind, names = status
        missing = [s.value for s in Status if s.value not in names]
        if kind != "SINGLE_SELECT" or missing:
            yield failed("board: Status field", "option-missing",
                         f"{gh.status_field!r} is {kind} with options {list(names)}; missing "
                         f"{missing}", f"add the option(s) {missing} to {gh.status_field!r}")  # fmt: skip
        else:
            yield passed("board: Status field", f"{gh.status_field!r} has {list(names)}")
    if not gh.lane_field:
        return
    lane = options_of(gh.lane_field)
    lanes = sorted({w.lane for w in ctx.inventory.workers})
    if lane is None:
        yield failed("board: Lane field", "field-missing", f"no field {gh.lane_field!r}",
                     f"add a text or single-select field {gh.lane_field!r}, or unset lane_field")  # fmt: skip
        return
    kind, names = lane
    absent = [n for n in lanes if kind == "SINGLE_SELECT" and n not in names]
    if kind not in ("SINGLE_SELECT", "TEXT") or absent:
        yield failed("board: Lane field", "option-missing",
                     f"{gh.lane_field!r} is {kind} with options {list(names)}; lanes {absent} absent",
                     f"add the lane option(s) {absent}, or make the field text")  # fmt: skip
    else:
        yield passed("board: Lane field", f"{gh.lane_field!r} ({kind}) fits lanes {lanes}")


@register("board: write probe")
def write_probe(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    """File one fixture-labelled issue (never work: predicate 9), comment on it, close it."""
    if not options.probe:
        return
    name = "board: label, comment, close"
    fixture = ctx.inventory.policy.fixture_label
    try:
        n = ctx.board.create_issue(PROBE_TITLE, "Filed by `invoke doctor`; closed at once.",
                                   labels=[fixture], status=None)  # fmt: skip
    except LabelsDropped as exc:
        yield failed(name, "labels-dropped", str(exc),
                     "give the token's user push (write) access to the repository")  # fmt: skip
        return
    except BoardError as exc:
        yield failed(name, "cannot-file", str(exc), "the token needs Issues: write")
        return
    try:
        ctx.board.comment(n, "doctor: comment check")
        ctx.board.close(n, StateReason.NOT_PLANNED)
    except BoardError as exc:
        yield failed(name, "cannot-write", f"#{n}: {exc}",
                     f"the token needs Issues: write; close #{n} by hand")  # fmt: skip
        return
    yield passed(name, f"filed #{n} with {fixture!r}, commented, closed it")


@register("workers", needs_board=False)
def workers(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    views = {v.name: v for v in probe_fleet(ctx)}
    gh = ctx.inventory.board.github
    for w in ctx.inventory.workers:
        v = views[w.name]
        where = f"worker {w.name}"
        if v.reach is Reach.OK:
            yield passed(f"{where}: reach", f"{w.transport} answered; runner importable")
        else:
            yield failed(f"{where}: reach", str(v.reach.value), v.detail, _REACH_FIX[v.reach])
            continue
        yield from _worker_script(ctx, w, gh.token_file if gh is not None else None)


_REACH_FIX = {
    Reach.UNREACHABLE: "check sshd on the worker, the host key in known_hosts, the key and the "
    "network (`ssh -p PORT MASTER@HOST true`)",
    Reach.NO_PERMISSION: "the master must own and be able to write its state_dir",
    Reach.NO_RUNNER: "install fleet for the worker's `python:`",
    Reach.OK: "",
}


def _worker_script(ctx: FleetContext, w: WorkerConfig, token_file: str | None) -> Iterator[Finding]:
    try:
        systemd = isinstance(ctx.supervisor(w), SystemdSupervisor)
        kind = SupervisorKind.SYSTEMD if systemd else SupervisorKind.PORTABLE
    except TransportError as exc:
        yield failed(
            f"worker {w.name}: supervisor", "unreachable", str(exc), _REACH_FIX[Reach.UNREACHABLE]
        )
        return
    origin = ctx.inventory.board.origin
    facts = wscript.WorkerFacts(w.name, kind, w.agent, w.clone, w.runner_clone, w.runner_remote,
                                w.state_dir, w.python, token_file,
                                str(origin) if origin else None)  # fmt: skip
    try:
        result = ctx.transport(w).run(wscript.script(facts), timeout=WORKER_TIMEOUT_S)
    except TransportError as exc:
        yield failed(
            f"worker {w.name}: checks", "unreachable", str(exc), _REACH_FIX[Reach.UNREACHABLE]
        )
        return
    yield from wscript.parse(w.name, result.stdout, facts)
