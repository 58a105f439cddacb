"""How the dispatch path scales with the number of masters, measured on the Docker harness (issue 13).

The harness's four containers are started with K masters each (``FLEET_HARNESS_MASTERS=K``, so
4K masters: 4, 8, 16, 32 for K = 1, 2, 4, 8), one fresh boot per layout, in Compose project
``fleet-scale`` (it never touches another harness). For each layout, in one run:

``guard``   ``--guard`` hand dispatches, ``dispatch()`` one at a time (the worker chosen by dispatch):
            guard-to-launch (the duplicate probe of every master under the lock, then the claim)
            and the lock hold, beside the floor on the same master (one unit-list probe and one
            unit start on the open connection, as bench/launch_bench.py measures it);
``probe``   the duplicate probe alone, ``probe_fleet(units_only=True)`` over every master:
            wall time and the workers' CPU per probe of the fleet;
``sweep``   one sweeper tick launching ``--sweep`` no-op issues: its wall time and lock hold.

Then a least-squares line of each figure against the number of masters, so the reader sees the
slope per master. Every master here shares the same two cores, so a probe of every master costs the
box CPU in proportion to the masters: the slope on this box is CPU, which a fleet of separate
machines does not share (docs/performance.md turns the measured per-master CPU into the model).

    PYTHONPATH=. python bench/scale_bench.py [--layouts 1,2,4,8] [--guard 30] [--sweep 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

from bench.harness_fleet import container_cpu_ns, quantile, setup
from bench.launch_bench import run_fleet, run_guard
from fleet.context import FleetContext
from fleet.observe import probe_fleet
from fleet.testing import harness

PROJECT = "fleet-scale"
PROBES = 30  # probes of the fleet per layout: enough for a median on a shared box


def boot(k: int) -> harness.HarnessInfo:
    """The harness with ``k`` masters on each worker, freshly booted (a master's user manager
    starts at boot, so a layout change needs a new boot)."""
    os.environ[harness.PROJECT_ENV] = PROJECT
    os.environ[harness.MASTERS_ENV] = str(k)
    harness.down()
    return harness.up()


def run_probe(bf_ctx: FleetContext, info: harness.HarnessInfo) -> dict[str, float]:
    """The duplicate probe of every master, as the lock holder runs it: wall and workers' CPU."""
    probe_fleet(bf_ctx)  # connections open and supervisors known, as before a lock is taken
    walls: list[float] = []
    cpu0 = sum(container_cpu_ns(info).values())
    own0 = _own_cpu_s()
    for _ in range(PROBES):
        t0 = time.monotonic()
        probe_fleet(bf_ctx, units_only=True)
        walls.append(time.monotonic() - t0)
    cpu = (sum(container_cpu_ns(info).values()) - cpu0) / 1e9 / PROBES
    own = (_own_cpu_s() - own0) / PROBES
    return {
        "median_s": statistics.median(walls),
        "p95_s": quantile(walls, 0.95),
        "cpu_s": cpu,
        "controller_cpu_s": own,
    }


def _own_cpu_s() -> float:
    """This process's CPU: the dispatcher's side of a probe (its threads, SSH, parsing)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b x``: (a, b)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - b * mx, b


def layout(k: int, guard: int, sweep: int) -> dict[str, object]:
    info = boot(k)
    bf = setup(info, payload="noop", tag=f"scale{k}")
    swept = run_fleet(bf, sweep)  # first: the hand dispatches leave their no-op issues queued
    with FleetContext(bf.inventory, bf.board, stderr=sys.stderr) as ctx:
        probe = run_probe(ctx, info)
    return {
        "masters_per_worker": k,
        "masters": len(info.endpoints()),
        "guard": run_guard(bf, guard),
        "probe": probe,
        "sweep": swept,
        "load_avg": os.getloadavg(),
    }


def show(rows: list[dict[str, object]]) -> dict[str, tuple[float, float]]:
    print(
        "masters  guard p50/p95 ms  floor p50 ms  hold p50 ms  probe ms (CPU ms)  sweep s (hold s)"
    )
    series: dict[str, list[float]] = {"guard": [], "hold": [], "probe": [], "probe_cpu": []}
    series["probe_ctl_cpu"] = []
    series |= {"floor": [], "sweep": [], "sweep_hold": []}
    for r in rows:
        g, p, s = r["guard"], r["probe"], r["sweep"]
        assert isinstance(g, dict) and isinstance(p, dict) and isinstance(s, dict)
        ms = {
            "guard": g["probe_to_live_s"]["median"] * 1000,
            "hold": g["lock_held_s"]["median"] * 1000,
            "floor": g["floor_s"]["median"] * 1000,
            "probe": p["median_s"] * 1000,
            "probe_cpu": p["cpu_s"] * 1000,
            "probe_ctl_cpu": p["controller_cpu_s"] * 1000,
            "sweep": s["wall_s"],
            "sweep_hold": s["lock_held_s"]["median"],
        }
        for key, value in ms.items():
            series[key].append(value)
        print(
            f"{r['masters']:>7}  {ms['guard']:6.1f} / {g['probe_to_live_s']['p95'] * 1000:6.1f}"
            f"   {ms['floor']:9.1f}   {ms['hold']:9.1f}   {ms['probe']:7.1f} ({ms['probe_cpu']:5.1f})"
            f"     {ms['sweep']:6.2f} ({ms['sweep_hold']:.2f})   load {r['load_avg'][0]:.1f}"  # type: ignore[index]
        )
    masters = [float(r["masters"]) for r in rows]  # type: ignore[arg-type]
    fits = {key: fit(masters, ys) for key, ys in series.items()}
    for key, (a, b) in fits.items():
        unit = "s" if key.startswith("sweep") else "ms"
        print(f"  fit {key:>10}: {a:8.2f} {unit} + {b:7.3f} {unit} per master")
    return fits


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layouts", default="1,2,4,8", help="masters per worker, comma-separated")
    p.add_argument("--guard", type=int, default=30, help="hand dispatches per layout")
    p.add_argument("--sweep", type=int, default=100, help="issues one sweep launches per layout")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--keep", action="store_true", help="leave the last layout's harness up")
    args = p.parse_args(argv)
    rows = []
    try:
        for k in (int(x) for x in args.layouts.split(",")):
            rows.append(layout(k, args.guard, args.sweep))
            print(f"layout {k}: done", file=sys.stderr, flush=True)
    finally:
        if not args.keep:
            harness.down()
    fits = show(rows)
    if args.json:
        out = {"rows": rows, "fits": fits, "load_avg": os.getloadavg()}
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    launched = all(r["sweep"]["launched"] == args.sweep for r in rows)  # type: ignore[index]
    return 0 if launched else 1


if __name__ == "__main__":
    sys.exit(main())
