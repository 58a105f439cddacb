"""Worker CPU of one no-op run: ``python -m fleet.runner`` as a unit starts it, against its floor.

No Docker: a throwaway embedded fleet in a temp dir (a local SQLite board, its bare origin, one
local worker) whose ``runner_clone`` syncs from a bare repository holding the checkout this
interpreter imports fleet from, published as the Docker harness publishes it, as D11 has a worker's
runner do; a first run, not counted, makes the clones. ``--count`` issues carry
``demo:no-op`` (the stand-in agent reads its issue and exits 0); each is run by the unit's own
argv (``fleet.dispatch.runner_argv``) with the unit's whole environment (``unit_env``), one at a
time, and the CPU of its whole process tree is read as the ``RUSAGE_CHILDREN`` delta around the
wait: the runner, its re-exec if any, the sync's shell and git, the worktree's git, the agent.

The peers, measured the same way in the same minute (one process each, median of ``--peer``):
the interpreter floor ``python -c pass``, step 1's sync script on the fresh runner clone, the
runner's imports ``python -c "import fleet.runner.run"``, the stand-in agent's imports, and the git
a run cannot leave out (one fetch of the work clone, one ``worktree add`` and ``remove``). The
floor printed is two interpreters (the runner's, the agent's) and that git. Then one more run
under ``strace -f -e
trace=execve`` (when strace is installed; its CPU is not counted) names every process a run starts,
and ``-X importtime`` the runner's heaviest imports.

Prints the per-run CPU median, how many runs re-executed (D11), the floor and the goal's ratio
(issue 13, goal 4: at most 0.5 s of worker CPU per no-op run); exits 1 when the goal is missed or
a run fails, 2 when a run passes its timeout.

    PYTHONPATH=. python bench/runner_bench.py [--count 20] [--peer 5] [--timeout 60]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import fleet
from bench.dispatch_bench import write_inventory
from fleet.board import open_board
from fleet.board.base import Board
from fleet.context import FleetContext
from fleet.core.markers import TERMINAL, history
from fleet.core.model import CIState, Reach, WorkerView
from fleet.core.sync import sync_command
from fleet.dispatch.claim import Ready, runner_argv, unit_env
from fleet.inventory import Inventory, WorkerConfig, load
from fleet.testing.harness import publish_source

GOAL_S = 0.5  # issue 13, goal 4: worker CPU per no-op run
RUN_TIMEOUT_S = 60.0  # bounds one run (a no-op run is ~1 s of wall on an idle box)
PEER_TIMEOUT_S = 60.0  # bounds one peer command
IMPORTS_SHOWN = 8  # the runner's heaviest top-level imports printed
WAIT_S = 2.0  # how long the waiting figure's child sleeps: long enough for a per-second rate


@dataclass(frozen=True)
class Cpu:
    """One waited-for process tree: its CPU (user + sys, seconds), wall time and exit code."""

    cpu_s: float
    wall_s: float
    code: int
    stderr: str


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measured(
    argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
    timeout: float = PEER_TIMEOUT_S,
) -> Cpu:  # fmt: skip
    """Run ``argv`` to its end and read its whole tree's CPU from this process's children's
    rusage (a descendant counts once its parent has waited for it, as the runner waits for git
    and its agent). One at a time: nothing else of ours runs meanwhile, so the delta is its own."""
    before, t0 = _children_cpu(), time.monotonic()
    proc = subprocess.Popen(
        list(argv), env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise
    return Cpu(_children_cpu() - before, time.monotonic() - t0, proc.returncode, err)


# -- the fleet ------------------------------------------------------------------------------------


def runner_remote(root: Path) -> Path:
    """A bare repository whose ``main`` holds the checkout this interpreter imports fleet from, as
    the Docker harness publishes it (``publish_source``: its files as they are on disk, its
    ``.gitignore`` too): the runner clone syncs from it, so the bench measures the tree it is run
    from, uncommitted edits included."""
    bare = root / "runner.git"
    publish_source(bare, source=Path(fleet.__file__).resolve().parent.parent)
    return bare


@dataclass(frozen=True)
class Bench:
    root: Path
    inventory: Inventory
    board: Board
    worker: WorkerConfig

    def unit(self, issue: int, run_id: str) -> tuple[list[str], dict[str, str]]:
        """The unit's argv and whole environment, from the dispatcher's own functions."""
        ctx = FleetContext(self.inventory, self.board)
        found = self.board.issue(issue)
        assert found is not None
        path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        view = WorkerView(self.worker.name, self.worker.lane, Reach.OK, path=path)
        ready = Ready(0, found, run_id, self.worker, view)
        return runner_argv(ctx, self.worker, issue, run_id), unit_env(ctx, ready, "green")

    def run(self, issue: int, run_id: str, timeout: float) -> Cpu:
        argv, env = self.unit(issue, run_id)
        return measured(argv, env=env, cwd=self.root, timeout=timeout)

    def file(self, title: str) -> int:
        return self.board.create_issue(title, "body", labels=["demo:no-op"])

    def terminal(self, issue: int) -> bool:
        found = self.board.issue(issue)
        return found is not None and any(
            m.kind in TERMINAL for m in history(found, "fleet").markers
        )


def make_bench(root: Path) -> Bench:
    clone = root / "workers" / "w1" / "runner"
    inv = load(write_inventory(root, runner_clone=clone, runner_remote=runner_remote(root)))
    board = open_board(inv, create=True)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    w = inv.worker("w1")
    assert w is not None
    return Bench(root, inv, board, w)


# -- the peers and the breakdown ------------------------------------------------------------------


def peers(b: Bench, rounds: int) -> dict[str, float]:
    """Median CPU of each peer, with the unit's environment (the runner clone on PYTHONPATH)."""
    _argv, env = b.unit(b.file("peer"), "peer")
    py = sys.executable
    clone = Path(b.worker.clone)
    out: dict[str, list[float]] = {}

    def one(name: str, argv: Sequence[str], cwd: Path | None = None) -> None:
        res = measured(argv, env=env, cwd=cwd or b.root)
        assert res.code == 0, f"{name}: exit {res.code}: {res.stderr}"
        out.setdefault(name, []).append(res.cpu_s)

    assert b.worker.runner_clone is not None
    sync = sync_command(b.worker.runner_clone, origin=b.worker.runner_remote, note="bench")
    for k in range(rounds):
        one("python -c pass", [py, "-c", "pass"])
        one("step 1's sync, clone fresh", ["/bin/sh", "-c", sync])
        one("import fleet.runner.run", [py, "-c", "import fleet.runner.run"])
        one("import fleet.agents.demo", [py, "-c", "import fleet.agents.demo"])
        one("git fetch (work clone)", ["git", "fetch", "-q", "origin"], clone)
        tree = b.root / f"peer-tree-{k}"
        one("git worktree add", ["git", "worktree", "add", "--detach", "-q", str(tree)], clone)
        one("git worktree remove", ["git", "worktree", "remove", str(tree)], clone)
    return {name: statistics.median(xs) for name, xs in out.items()}


def wait_cpu(seconds: float) -> tuple[float | None, float]:
    """CPU this process spends per second waiting on a child that sleeps ``seconds``: through the
    runner's ``exit_within`` (None on a tree without it) and, its peer, ``Popen.wait(timeout)``."""
    try:
        from fleet.runner.waiting import exit_within
    except ImportError:  # a checkout from before the pidfd wait: only the peer is measured
        exit_within = None  # type: ignore[assignment]

    def cost(wait: Callable[[subprocess.Popen[bytes]], object]) -> float:
        child = subprocess.Popen(["sleep", str(seconds)])
        before = time.process_time()
        wait(child)
        return (time.process_time() - before) / seconds

    limit = seconds + PEER_TIMEOUT_S
    ours = None if exit_within is None else cost(lambda p: exit_within(p, limit))
    return ours, cost(lambda p: p.wait(timeout=limit))


def _git_subcommand(args: Sequence[str]) -> str:
    """The subcommand of a git argv: its first word past the options (``-C DIR``, ``-c K=V``)."""
    rest = iter(args)
    for arg in rest:
        if arg in ("-C", "-c"):
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return "?"


def exec_counts(b: Bench, timeout: float) -> Counter[str] | None:
    """Every process one run starts, by program (git by subcommand), read from strace."""
    strace = shutil.which("strace")
    if strace is None:
        return None
    n = b.file("strace")
    argv, env = b.unit(n, "strace")
    trace = b.root / "strace.out"
    cmd = [strace, "-f", "-qq", "-e", "trace=execve", "-e", "signal=none", "-o", str(trace), *argv]
    res = measured(cmd, env=env, cwd=b.root, timeout=timeout)
    assert res.code == 0, res.stderr
    counts: Counter[str] = Counter()
    for line in trace.read_text(errors="replace").splitlines():
        m = re.search(r'execve\("([^"]+)", \[(.*?)\]', line)
        if m is None or "= -1 " in line:
            continue
        args = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
        prog = os.path.basename(m.group(1))
        if prog == "git":
            prog = f"git {_git_subcommand(args[1:])}"
        elif prog.startswith("python") and "-m" in args:
            prog = f"python -m {args[args.index('-m') + 1]}"
        counts[prog] += 1
    return counts


def heaviest_imports(env: dict[str, str], cwd: Path) -> tuple[float, list[tuple[str, int]]]:
    """``-X importtime`` of the runner's entry: the total and the heaviest top-level packages."""
    res = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import fleet.runner.__main__"],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=PEER_TIMEOUT_S, check=True,
    )  # fmt: skip
    tops: dict[str, int] = {}
    for line in res.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 1 and name.strip() != "fleet.runner.__main__":
            top = name.strip()
            tops[top] = max(tops.get(top, 0), int(parts[1]))
    entry = next(
        (
            int(p.split("|")[1])
            for p in res.stderr.splitlines()
            if p.endswith("fleet.runner.__main__")
        ),
        0,
    )
    heavy = sorted(tops.items(), key=lambda kv: -kv[1])[:IMPORTS_SHOWN]
    return entry / 1e6, heavy


# -- the bench ------------------------------------------------------------------------------------


def bench(count: int, rounds: int, timeout: float, root: Path) -> int:
    b = make_bench(root)
    warm = b.run(b.file("warm-up"), "warm", timeout)  # makes both clones: not counted
    if warm.code != 0:
        print(f"bench: the warm-up run exited {warm.code}:\n{warm.stderr}", file=sys.stderr)
        return 1
    runs: list[Cpu] = []
    for i in range(count):
        n = b.file(f"no-op {i}")
        try:
            res = b.run(n, f"r{i}", timeout)
        except subprocess.TimeoutExpired:
            print(f"bench: run {i} passed its {timeout:.0f}s timeout", file=sys.stderr)
            return 2
        if res.code != 0 or not b.terminal(n):
            print(f"bench: run {i} exited {res.code} ({b.terminal(n)=}):\n{res.stderr}")
            return 1
        runs.append(res)
    floor = peers(b, rounds)
    load = os.getloadavg()[0]
    cpu = statistics.median(r.cpu_s for r in runs)
    wall = statistics.median(r.wall_s for r in runs)
    reexec = [i for i, r in enumerate(runs) if "re-executing once" in r.stderr]
    print(f"runner bench: {count} no-op runs, one at a time; load average {load:.1f}")
    print(
        f"  per run: CPU median {cpu * 1000:.0f} ms (min {min(r.cpu_s for r in runs) * 1000:.0f}, "
        f"max {max(r.cpu_s for r in runs) * 1000:.0f}), wall median {wall * 1000:.0f} ms; "
        f"re-executed (D11): {len(reexec)} of {count}"
        + (f" (runs {', '.join(map(str, reexec))}, from 0)" if reexec else "")
    )
    print(f"  peers, CPU median of {rounds}:")
    for name, value in floor.items():
        print(f"    {name:<26} {value * 1000:6.0f} ms")
    must = (
        2 * floor["python -c pass"]  # the runner's interpreter and the agent's
        + floor["git fetch (work clone)"]
        + floor["git worktree add"]
        + floor["git worktree remove"]
    )
    print(f"  floor (two interpreters + fetch + worktree add/remove): {must * 1000:.0f} ms; "
          f"run / floor {cpu / must:.2f}")  # fmt: skip
    agent = floor["import fleet.agents.demo"]
    print(f"  the stand-in agent's start and imports (its peer): {agent * 1000:.0f} ms; "
          f"the rest of a run, the runner's and its git: {(cpu - agent) * 1000:.0f} ms")  # fmt: skip
    counts = exec_counts(b, timeout)
    if counts is not None:
        shown = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"  processes one run starts ({sum(counts.values())}): {shown}")
    _argv, env = b.unit(b.file("imports"), "imports")
    total, heavy = heaviest_imports(env, b.root)
    print(f"  -X importtime of fleet.runner.__main__: {total * 1000:.0f} ms; heaviest: "
          + ", ".join(f"{name} {us / 1000:.0f} ms" for name, us in heavy))  # fmt: skip
    ours, peer = wait_cpu(WAIT_S)
    print(
        f"  waiting on the agent ({WAIT_S:.0f} s asleep): "
        + ("n/a" if ours is None else f"{ours * 1000:.2f} ms of CPU per second")
        + f"; Popen.wait(timeout): {peer * 1000:.2f} ms per second"
    )
    ratio = cpu / GOAL_S
    ok = ratio <= 1.0
    print(f"goal 4 (<= {GOAL_S * 1000:.0f} ms of CPU per no-op run): ratio {ratio:.2f} "
          + ("met" if ok else "MISSED"))  # fmt: skip
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=20, help="how many no-op runs to measure")
    p.add_argument("--peer", type=int, default=5, help="rounds of each peer command")
    p.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="bounds one run (s)")
    args = p.parse_args(argv)
    if args.count < 1 or args.peer < 1:
        p.error("--count and --peer must be at least 1")
    with tempfile.TemporaryDirectory(prefix="fleet-runner-bench-") as tmp:
        return bench(args.count, args.peer, args.timeout, Path(tmp).resolve())


if __name__ == "__main__":
    sys.exit(main())
