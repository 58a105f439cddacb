"""``python -m fleet.runner``: run step 1 (sync the runner's own clone, re-exec once), then the run.

D11: a runner must never run stale code. When the worker names a ``runner_clone``, it is synced to
its remote and verified (local HEAD equals the fetched ref, never trusting an exit code), then the
runner re-executes itself from that clone exactly once, guarded by ``FLEET_RUNNER_REEXEC``. A clone
that cannot be synced stops the run before it starts (exit 70) rather than run frozen doctrine.

The dispatcher starts the runner from the clone (``PYTHONPATH``), so when the sync finds the clone
already at the fetched ref, with a clean tree, the running process *is* the fresh code and the
re-exec would buy nothing but a second interpreter start: it is left out, and the log says so.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import fleet
from fleet.board import check_identity, open_board
from fleet.board.base import BoardError, IdentityMismatch
from fleet.core.exits import PRESTART_CAUSES, RunExit
from fleet.core.sync import SyncResult, SyncState, parse_sync, sync_command
from fleet.inventory import InventoryError, WorkerConfig, load
from fleet.private import private_umask
from fleet.runner.prestart import PRESTART_EXITS, STATE_DIR_ENV, record_death
from fleet.runner.run import Runner

REEXEC_ENV = "FLEET_RUNNER_REEXEC"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fleet.runner", description=__doc__)
    p.add_argument("--issue", type=int, required=True)
    p.add_argument("--worker", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--inventory", required=True)
    return p.parse_args(argv)


def sync_runner_clone(clone: str, remote: str | None, run_id: str) -> SyncResult:
    """Step 1's sync of the runner's own clone: the same script and rule as check 9."""
    cmd = sync_command(clone, origin=remote, note=f"runner sync for run {run_id}")
    res = subprocess.run(
        ["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=300, check=False
    )
    return parse_sync(res.stdout)


_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
# A clone moved this close to the start counts as moved after it (a re-exec, the safe way): the
# start below is precise to a clock tick, and file systems stamp HEAD and the index from a coarser
# clock than the wall clock (a jiffy; whole seconds on some). The sync writes neither file when the
# clone does not move (fleet.core.sync), so this margin costs a re-exec only after a real move.
START_SLACK_S = 1.0


def process_started_at() -> float | None:
    """This process's start on the wall clock (Linux /proc), precise to a clock tick: its start in
    ticks since boot, placed on the wall clock through the boot clock read now — not through the
    boot time in /proc/stat, which is whole seconds and would place the start up to a second early
    (a runner started a second after a move would re-exec for nothing). None where it cannot be
    read."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            after_name = handle.read().rsplit(")", 1)[1].split()
        ticks = int(after_name[19])  # field 22, starttime: clock ticks since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):  # AttributeError: no CLOCK_BOOTTIME
        return None


def loaded_head(
    clone: str, *, package: Path | None = None, started: float | None = None
) -> str | None:
    """The commit this process's code was loaded from, when that is certain: fleet was imported
    from ``clone``, whose detached HEAD and index were last written before this process started.
    Another run's sync may move the shared clone after this process imported its code and before
    this read; then HEAD names code this process never loaded, so the answer is None and only a
    re-exec runs the clone's code (D11). None too for an installed fleet, an attached HEAD, or a
    clone whose files cannot be read."""
    package = package or Path(fleet.__file__).resolve().parent
    root = Path(clone).expanduser().resolve()
    started = process_started_at() if started is None else started
    if package.parent != root or started is None:
        return None
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text(encoding="ascii").strip()
        written = max((git / name).stat().st_mtime for name in ("HEAD", "index"))
    except (OSError, UnicodeDecodeError):
        return None
    if not _SHA.fullmatch(head) or written >= started - START_SLACK_S:
        return None
    return head


def _step_1(worker: WorkerConfig, run_id: str) -> int | None:
    """Sync the runner clone; re-exec from it unless this process already is its fresh code.
    Returns an exit code when the run must stop (70: stale), None to go on in this process."""
    assert worker.runner_clone
    before = loaded_head(worker.runner_clone)
    out = sync_runner_clone(worker.runner_clone, worker.runner_remote, run_id)
    detail = f"{out.state}: {out.detail}"
    if not out.synced:
        print(
            f"fleet-runner: runner clone {worker.runner_clone} not synced ({detail}); "
            "refusing to run stale code (D11)",
            file=sys.stderr,
        )
        return RunExit.STALE
    if before is not None and out.state is SyncState.OK and out.detail == before:
        print(
            f"fleet-runner: runner clone synced ({detail}); this process was loaded from that "
            "commit: no re-exec",
            file=sys.stderr,
        )
        return None
    env = dict(os.environ)
    env[REEXEC_ENV] = run_id
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (worker.runner_clone, env.get("PYTHONPATH", "")) if p
    )
    print(f"fleet-runner: runner clone synced ({detail}); re-executing once", file=sys.stderr)
    os.execve(sys.executable, [sys.executable, "-m", "fleet.runner", *sys.argv[1:]], env)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    private_umask()  # the run's artifacts and the agent's files: the master's only (fleet.private)
    state: dict[str, object] = {}
    code = _main(args, state)
    runner = state.get("runner")
    started = isinstance(runner, Runner) and runner.start_posted
    if code in PRESTART_EXITS and not started:
        _record_death(args, state.get("state_dir"), code)
    return code


def _record_death(args: argparse.Namespace, state_dir: object, code: int) -> None:
    """A death before the start marker leaves nothing on the board: record it on the worker so
    the next sweeps count it instead of relaunching forever (fleet.runner.prestart)."""
    where = state_dir if isinstance(state_dir, str) else os.environ.get(STATE_DIR_ENV)
    if not where:
        print(
            f"fleet-runner: exit {code} before the start marker, and no state directory is known "
            f"(no inventory, no ${STATE_DIR_ENV}): this death is not counted",
            file=sys.stderr,
        )
        return
    why = PRESTART_CAUSES.get(RunExit(code), "died")
    warning = record_death(
        where, issue=args.issue, run_id=args.run_id, code=code, why=why, now=datetime.now(UTC)
    )
    print(
        warning or f"fleet-runner: exit {code} before the start marker, recorded in {where}",
        file=sys.stderr,
    )


def _main(args: argparse.Namespace, state: dict[str, object]) -> int:
    try:
        inv = load(args.inventory)
    except (InventoryError, OSError) as exc:
        print(f"fleet-runner: inventory {args.inventory}: {exc}", file=sys.stderr)
        return RunExit.NO_CONFIG
    for warning in inv.warnings:
        print(f"fleet-runner: {warning}", file=sys.stderr)
    worker = inv.worker(args.worker)
    if worker is None:
        print(f"fleet-runner: no worker {args.worker!r} in {args.inventory}", file=sys.stderr)
        return RunExit.NO_CONFIG
    state["state_dir"] = worker.state_dir
    if worker.runner_clone and os.environ.get(REEXEC_ENV) != args.run_id:
        stop = _step_1(worker, args.run_id)
        if stop is not None:
            return stop
    elif not worker.runner_clone:
        print(
            "fleet-runner: no runner_clone configured for this worker; running the installed fleet",
            file=sys.stderr,
        )
    try:
        board = open_board(inv)
    except BoardError as exc:
        print(f"fleet-runner: the board cannot be opened: {exc}", file=sys.stderr)
        return RunExit.NO_CONFIG
    try:  # before any marker: a marker under another login is not the fleet's (#11 item 3)
        check_identity(board)
    except IdentityMismatch as exc:
        print(f"fleet-runner: {exc}; nothing posted", file=sys.stderr)
        return RunExit.IDENTITY_MISMATCH
    except BoardError as exc:  # an outage: the check runs again before the first write
        print(f"fleet-runner: identity not checked yet ({exc})", file=sys.stderr)
    runner = state["runner"] = Runner(inv, board, worker, args.issue, args.run_id)
    try:
        return runner.run()
    except (
        Exception
    ):  # exit 1 means "a failure marker was posted"; a crash claims no terminal (D20)
        import traceback  # only a crash prints one: a run that ends as it should never loads it

        traceback.print_exc()
        print("fleet-runner: crashed; see the traceback above", file=sys.stderr)
        return RunExit.CRASHED


if __name__ == "__main__":
    sys.exit(main())
