"""Dispatch latency on the embedded default: N no-op issues on a one-worker local fleet.

Reads ``DispatchResult.timings``: ``probe_to_live_s`` (the fleet-wide probe, check 6, through the
unit-name claim, check 10) and ``lock_held_s`` (how long the fleet lock is held, D4 — the window
every other dispatcher waits on). Prints median and p95 of both. Each run is waited out (its
terminal marker, its unit collected) before the next dispatch, so every figure is one dispatch on
an idle worker.

Its peer, taken just before each dispatch in the same loop so that both see the same load, is the
floor of that window: the cheapest process start a claim could need (the worker's Python with no
``site``: ``python -S -c pass``) plus one read of the worker's unit records (the in-process probe).
The goal (issue 13) is a guard-to-launch median under 100 ms; the bench prints the median against
the goal and against the floor, and exits 1 when the goal is missed or a dispatch was refused.

    PYTHONPATH=. python bench/dispatch_bench.py [--count 100]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleet import inventory_builder
from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.markers import TERMINAL, history
from fleet.core.model import CIState
from fleet.dispatch import dispatch
from fleet.inventory import WorkerConfig, load

# A no-op run is a runner start plus a few git commands (~1 s locally); this bounds a wedged one.
RUN_DEADLINE_S = 30.0
POLL_S = 0.1  # poll period while waiting for a run's terminal marker and its unit's collection
GOAL_P50_S = 0.100  # issue 13, goal 2: guard-to-launch median on the embedded default


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _wait_idle(ctx: FleetContext, w: WorkerConfig, number: int) -> bool:
    """Until the run posted its terminal marker and its unit was collected (the name free, the
    supervisor gone): the next dispatch then meets an idle worker, and the temporary directory is
    not removed under a supervisor still writing its result."""
    end = time.monotonic() + RUN_DEADLINE_S
    while time.monotonic() < end:
        issue = ctx.board.issue(number)
        ended = issue is not None and any(
            m.kind in TERMINAL for m in history(issue, "fleet").markers
        )
        if ended and not ctx.supervisor(w).probe():
            return True
        time.sleep(POLL_S)
    return False


def floor_s(ctx: FleetContext, w: WorkerConfig) -> float:
    """One bare interpreter start of the worker's Python and one read of its unit records (its
    supervisor's probe, in this process as the dispatch's): what a local claim cannot go below."""
    began = time.monotonic()
    subprocess.run([w.python, "-S", "-c", "pass"], check=True)
    ctx.supervisor(w).probe()
    return time.monotonic() - began


def write_inventory(root: Path, **worker: object) -> Path:
    """The embedded default's layout under ``root``: one local worker under the portable
    supervisor, running the stand-in agent with this Python, with ``worker``'s further fields; a
    60 s run limit bounds a wedged run."""
    w1 = inventory_builder.local_worker(
        root,
        "w1",
        python=sys.executable,
        agent=f"{sys.executable} -m fleet.agents.demo",
        supervisor="portable",
        path_prefix=[],
        **worker,
    )
    data = inventory_builder.under(root, [w1], policy={"max_run_s": 60})
    return inventory_builder.write(root / "inventory.yaml", data)


def run(count: int, root: Path) -> int:
    inv = load(write_inventory(root))
    board = open_board(inv, create=True)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    probe: list[float] = []
    held: list[float] = []
    floor: list[float] = []
    refused = 0
    with FleetContext(inv, board) as ctx:
        w1 = ctx.worker("w1")
        assert w1 is not None
        for i in range(count):
            n = board.create_issue(f"bench no-op {i}", "body", labels=["demo:no-op"])
            floor.append(floor_s(ctx, w1))
            r = dispatch(ctx, n, worker="w1")
            if not r.launched:
                refused += 1
                print(r.line(), file=sys.stderr)
                continue
            probe.append(r.timings["probe_to_live_s"])
            held.append(r.timings["lock_held_s"])
            if not _wait_idle(ctx, w1, n):
                print(
                    f"bench: #{n} was not ended and collected after {RUN_DEADLINE_S}s",
                    file=sys.stderr,
                )
    if not probe:
        print("bench: no dispatch launched", file=sys.stderr)
        return 1
    print(f"dispatches: {count} ({len(probe)} launched, {refused} refused)")
    for name, xs in (("probe_to_live_s", probe), ("lock_held_s", held), ("floor", floor)):
        print(
            f"{name:>16}: median {statistics.median(xs) * 1000:7.1f} ms   "
            f"p95 {_quantile(xs, 0.95) * 1000:7.1f} ms   max {max(xs) * 1000:7.1f} ms"
        )
    p50 = statistics.median(probe)
    met = p50 < GOAL_P50_S
    print(
        f"guard-to-launch median {p50 * 1000:.1f} ms: {p50 / GOAL_P50_S:.2f} of the "
        f"{GOAL_P50_S * 1000:.0f} ms goal ({'met' if met else 'MISSED'}); "
        f"{p50 / statistics.median(floor):.2f}x the floor ({statistics.median(floor) * 1000:.1f} ms)"
    )
    return 0 if refused == 0 and met else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=100, help="how many no-op issues to dispatch")
    args = p.parse_args(argv)
    if args.count < 1:
        p.error("--count must be at least 1")
    with tempfile.TemporaryDirectory(prefix="fleet-dispatch-bench-") as tmp:
        return run(args.count, Path(tmp).resolve())


if __name__ == "__main__":
    sys.exit(main())
