"""Launch rate and guard-to-launch against the number of workers (1–4 containers): docs/performance.png.

For each number of containers (their masters: w1; w1–w2; w1–w3; w1–w3 and w4's two masters) one
``bench/launch_bench.py`` run: the sweeper's launch rate and GNU parallel's on the same masters in
the same run (D13: every figure has its peer measured beside it), and the guard-to-launch of
``dispatch()`` one at a time. The figures go to a JSON file first, so the plot can be redrawn
without measuring again (``--from-json``).

    PYTHONPATH=. python bench/plot.py [--count 200] [--guard 50] [--json bench/launch-sweep.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_JSON = REPO / "docs" / "performance.json"
DEFAULT_PNG = REPO / "docs" / "performance.png"


def measure(count: int, guard: int, containers: list[int], rounds: int) -> list[dict[str, object]]:
    from bench.launch_bench import bench, show

    runs = []
    for n in containers:
        out = bench(count, n, "noop", None, guard, rounds)
        show(out)
        runs.append(out)
    return runs


def plot(runs: list[dict[str, object]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [int(r["containers"]) for r in runs]  # type: ignore[call-overload]
    masters = [len(r["masters"]) for r in runs]  # type: ignore[arg-type]
    labels = [f"{x}\n({m} master{'s' if m > 1 else ''})" for x, m in zip(xs, masters, strict=True)]

    def get(r: dict[str, object], *path: str) -> float:
        v: object = r
        for key in path:
            v = v[key]  # type: ignore[index]
        return float(v)  # type: ignore[arg-type]

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot(
        xs, [get(r, "fleet", "rate") for r in runs], "o-", label="fleet sweeper (every guard)"
    )
    left.plot(xs, [get(r, "parallel", "rate") for r in runs], "s--", label="GNU parallel -M, true")
    left.plot(
        xs,
        [get(r, "parallel_unit", "rate") for r in runs],
        "^:",
        label="GNU parallel -M, systemd-run unit",
    )
    left.set_title(f"launch rate, {runs[0]['count']} no-op launches")
    left.set_ylabel("launches per second")
    left.set_ylim(bottom=0)
    right.plot(
        xs,
        [get(r, "guard", "probe_to_live_s", "median") * 1000 for r in runs],
        "o-",
        label="median",
    )
    right.plot(
        xs, [get(r, "guard", "probe_to_live_s", "p95") * 1000 for r in runs], "s--", label="p95"
    )
    if all(isinstance(g := r.get("guard"), dict) and g.get("floor_s") for r in runs):
        right.plot(
            xs,
            [get(r, "guard", "floor_s", "median") * 1000 for r in runs],
            "^:",
            label="floor median (one list + one start, one master)",
        )
    right.set_title("guard-to-launch: duplicate probe -> unit live")
    right.set_ylabel("milliseconds (dispatch() one at a time)")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xticks(xs, labels)
        ax.set_xlabel("worker containers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    loads = sorted(float(x["load_avg"][0]) for r in runs for x in r.get("rounds", []))  # type: ignore[attr-defined,index]
    busy = f", 1-min load average {loads[len(loads) // 2]:.0f} (shared box)" if loads else ""
    fig.suptitle(
        f"fleet on the four-container Docker harness (2 cores, loopback SSH{busy}); "
        f"medians of {len(runs[0].get('rounds', [])) or 1} rounds",  # type: ignore[arg-type]
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--guard", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--containers", default="1,2,3,4", help="comma-separated, each 1..4")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--png", type=Path, default=DEFAULT_PNG)
    p.add_argument("--from-json", action="store_true", help="plot the saved figures, measure none")
    args = p.parse_args(argv)
    if args.from_json:
        runs = json.loads(args.json.read_text())
    else:
        wanted = [int(x) for x in args.containers.split(",")]
        runs = measure(args.count, args.guard, wanted, args.rounds)
        args.json.write_text(json.dumps(runs, indent=2) + "\n")
    plot(runs, args.png)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
