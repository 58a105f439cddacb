"""The integration tests' fleet: one real local fleet on the embedded default, and its helpers.

A :class:`Fleet` is a real SQLite board, a real bare origin and local workers under the portable
supervisor running the stand-in agent (``python -m fleet.agents.demo``), its inventory built by
``fleet.inventory_builder`` in the embedded default's layout (the demo's, fleet/demo.py), all under
one test directory. :func:`make_fleet` builds one (``edit`` changes its inventory, as data, before
it is loaded); :func:`runner_fleet` and :func:`fleet_at` are the one-worker fleet the runner-step
tests use, with extra worker keys, another agent or the worker's directories named elsewhere.

The rest waits on and reads a fleet: :func:`wait_for` a board state, :func:`kinds` of an issue's
markers, :func:`refuses` (a dispatch refusal that wrote nothing), the runner invoked directly
(:func:`run_runner`), the production CLI in its own process (:func:`fleet_cli`). No tests here:
``conftest.py`` turns :func:`make_fleet` into the ``fleet`` fixture.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from fleet import inventory_builder
from fleet.board import open_board
from fleet.board.base import Board
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.markers import Kind, history
from fleet.core.model import CIState, Issue
from fleet.dispatch import dispatch
from fleet.inventory import Inventory, WorkerConfig, load
from fleet.inventory_builder import InventoryData
from fleet.runner.__main__ import REEXEC_ENV

# A whole default-mode run (runner start, worktree, demo agent's git work, close-out) takes ~1 s
# locally; this bounds a wedged one so the test fails instead of hanging.
RUN_DEADLINE_S = 30.0
POLL_S = 0.2  # board poll period while waiting on a run
# The unit's run-time limit: the backstop that ends a leaked demo:hang unit if a test dies before
# its own stop (the hang agent sleeps for an hour otherwise).
MAX_RUN_S = 40
RUNNER_TIMEOUT_S = 90  # bounds one directly invoked runner (a whole demo run takes seconds)
CLI_TIMEOUT_S = 90.0  # one CLI call: interpreter start + a probe + at most one stop (20 s grace)
_GIT = ["git", "-c", "user.name=fleet-test", "-c", "user.email=fleet-test@localhost"]

# An edit of a fleet's inventory, as data, before it is written: (data, the fleet's root) -> None.
Edit = Callable[[InventoryData, Path], None]


@dataclass
class Fleet:
    root: Path
    inventory_path: Path
    inventory: Inventory
    board: Board
    ctx: FleetContext

    def stop(self, worker: str, issue: int) -> None:
        w = self.inventory.worker(worker)
        assert w is not None
        self.ctx.supervisor(w).stop(issue, timeout_s=10.0)


# -- building a fleet ----------------------------------------------------------------------------


def demo_agent() -> str:
    """The stand-in agent run by this interpreter, so a worker imports this checkout."""
    return f"{sys.executable} -m fleet.agents.demo"


def fleet_inventory(
    root: Path, workers: tuple[str, ...] = ("w1",), *, lock_wait_s: float = 30
) -> InventoryData:
    """The embedded default's fleet under ``root`` (fleet.demo's layout), with named local workers
    under the portable supervisor, this Python, the stand-in agent and a run limit of
    ``MAX_RUN_S``."""
    return inventory_builder.under(
        root,
        [
            inventory_builder.local_worker(
                root,
                name,
                python=sys.executable,
                agent=demo_agent(),
                supervisor="portable",
                path_prefix=[],
            )
            for name in workers
        ],
        lock_wait_s=lock_wait_s,
        policy={"max_run_s": MAX_RUN_S},
    )


def write_fleet_inventory(
    root: Path,
    workers: tuple[str, ...] = ("w1",),
    *,
    lock_wait_s: float = 30,
    edit: Edit | None = None,
) -> Path:
    """:func:`fleet_inventory`, edited by ``edit``, written to ``root/inventory.yaml``."""
    data = fleet_inventory(root, workers, lock_wait_s=lock_wait_s)
    if edit is not None:
        edit(data, root)
    return inventory_builder.write(root / "inventory.yaml", data)


def make_fleet(
    root: Path,
    workers: tuple[str, ...] = ("w1",),
    *,
    lock_wait_s: float = 30,
    edit: Edit | None = None,
) -> Fleet:
    """A fleet on :func:`write_fleet_inventory`'s inventory: its board created, CI green."""
    root = root.resolve()  # D10: worktree pointers are written from the physical path
    path = write_fleet_inventory(root, workers, lock_wait_s=lock_wait_s, edit=edit)
    inv = load(path)
    board = open_board(inv, create=True)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    return Fleet(root, path, inv, board, FleetContext(inv, board))


def closed_port() -> int:
    """A port nobody listens on (free a moment ago): an SSH worker that cannot be reached."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ghost(root: Path, **fields: object) -> dict[str, object]:
    """An SSH worker on a closed port (its known_hosts an empty file under ``root``): its probe
    is could-not-check and a dispatch to it unreachable."""
    known = root / "known_hosts"
    known.write_text("")
    return inventory_builder.worker(
        "ghost",
        transport="ssh",
        host="127.0.0.1",
        port=closed_port(),
        master="root",
        known_hosts=known,
        state_dir="/tmp/fleet-ghost",
        **fields,
    )


def with_ghost(data: InventoryData, root: Path) -> None:
    """An :data:`Edit`: the :func:`ghost` beside the fleet's workers."""
    data["workers"].append(ghost(root))


def only_ghost(data: InventoryData, root: Path) -> None:
    """An :data:`Edit`: the :func:`ghost` instead of the fleet's workers."""
    data["workers"] = [ghost(root)]


def set_worker(name: str = "w1", **fields: object) -> Edit:
    """An :data:`Edit` setting fields of the worker ``name`` (``None`` removes one)."""

    def edit(data: InventoryData, _root: Path) -> None:
        (w,) = (w for w in data["workers"] if w["name"] == name)
        for key, value in fields.items():
            if value is None:
                w.pop(key, None)
            else:
                w[key] = os.fspath(value) if isinstance(value, os.PathLike) else value

    return edit


# -- reading a fleet -----------------------------------------------------------------------------


def all_comments(board: Board) -> int:
    issues: tuple[Issue, ...] = board.list_issues()  # type: ignore[attr-defined]
    return sum(len(i.comments) for i in issues)


def wait_for(
    board: Board, number: int, done: Callable[[Issue], bool], deadline_s: float = RUN_DEADLINE_S
) -> Issue:
    """Poll the board until ``done(issue)``; bounded, so a wedged run fails the test."""
    end = time.monotonic() + deadline_s
    while True:
        issue = board.issue(number)
        assert issue is not None
        if done(issue):
            return issue
        if time.monotonic() > end:
            bodies = [c.body.splitlines()[0] for c in issue.comments]
            raise AssertionError(f"#{number} not done after {deadline_s}s: {issue.state} {bodies}")
        time.sleep(POLL_S)


def kinds(issue: Issue) -> list[Kind]:
    return [m.kind for m in history(issue, "fleet").markers]


def has_marker(kind: Kind) -> Callable[[Issue], bool]:
    return lambda issue: kind in kinds(issue)


def refuses(f: Fleet, number: int, code: Exit, check: int | None, **kw: object) -> str:
    """Dispatch, assert the refusal and that the board took no write; return the one line."""
    before = all_comments(f.board)
    r = dispatch(f.ctx, number, **kw)  # type: ignore[arg-type]
    assert r.outcome == "refused", r
    assert r.code is code, r.line()
    assert r.check == check, r.line()
    assert not r.launched
    assert all_comments(f.board) == before, "a refusal wrote to the board (D6)"
    line = r.line()
    assert line.startswith(f"fleet: #{number} refused by check {check}:")
    assert "\n" not in line
    return line


def fleet_cli(f: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    """The production CLI in its own process: ``fleet ARGS --inventory F``."""
    code = "import sys; from fleet.cmd.cli import program; program.run(['fleet', *sys.argv[1:]])"
    return subprocess.run(
        [sys.executable, "-c", code, *args, "--inventory", str(f.inventory_path)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=f.root,
    )


# -- the runner-step tests' fleet: one worker, the runner run for real ----------------------------


def runner_fleet(
    root: Path,
    *,
    worker_extra: Mapping[str, str] | None = None,
    agent: str = "",
    worker_dir: Path | None = None,
) -> Fleet:
    """:func:`make_fleet`'s one-worker fleet, with extra worker keys (runner_clone...), another
    agent, or the worker's clone and state directory named through ``worker_dir`` (a symlink)."""

    def edit(data: InventoryData, _root: Path) -> None:
        (w1,) = data["workers"]
        if worker_dir is not None:
            w1["clone"], w1["state_dir"] = str(worker_dir / "clone"), str(worker_dir)
        w1.update(worker_extra or {})
        if agent:
            w1["agent"] = agent

    return make_fleet(root, edit=edit)


@contextlib.contextmanager
def fleet_at(
    root: Path,
    *,
    worker_extra: Mapping[str, str] | None = None,
    agent: str = "",
    worker_dir: Path | None = None,
) -> Iterator[Fleet]:
    """:func:`runner_fleet`, its context closed on the way out."""
    f = runner_fleet(root, worker_extra=worker_extra, agent=agent, worker_dir=worker_dir)
    try:
        yield f
    finally:
        f.ctx.close()


def worker(f: Fleet) -> WorkerConfig:
    w = f.inventory.worker("w1")
    assert w is not None
    return w


def run_runner(
    f: Fleet, issue: int, run_id: str, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The unit's own command (``dispatch.runner_argv``), run directly so its exit code is ours.

    The working directory holds no ``fleet`` package, as under a unit: ``python -m`` puts it first
    on ``sys.path``, ahead of the runner clone a re-exec names.
    """
    argv = [sys.executable, "-m", "fleet.runner", "--issue", str(issue), "--worker", "w1"]
    argv += ["--run-id", run_id, "--inventory", str(f.inventory_path)]
    full = {k: v for k, v in os.environ.items() if k not in (REEXEC_ENV, "PYTHONPATH")}
    full.update(env or {})
    return subprocess.run(
        argv,
        cwd=f.root,
        env=full,
        capture_output=True,
        text=True,
        timeout=RUNNER_TIMEOUT_S,
        check=False,
    )


def markers(f: Fleet, n: int) -> list[Kind]:
    issue = f.board.issue(n)
    assert issue is not None
    return kinds(issue)


def wait_for_unit_result(f: Fleet, n: int) -> dict[str, object]:
    """The portable supervisor's record of how task-N ended (bounded poll on a file it writes)."""
    path = Path(worker(f).state_dir) / "units" / f"task-{n}.result.json"
    end = time.monotonic() + RUN_DEADLINE_S
    while not path.exists():
        assert time.monotonic() < end, f"task-{n} did not end within {RUN_DEADLINE_S}s"
        time.sleep(POLL_S)
    result: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return result


def unit_log(f: Fleet, n: int) -> str:
    return (Path(worker(f).state_dir) / "units" / f"task-{n}.log").read_text(errors="replace")


def git(*args: str, cwd: Path | None = None) -> str:
    res = subprocess.run(
        [*_GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True
    )
    return res.stdout.strip()
