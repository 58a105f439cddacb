"""Launch rate on the Docker harness: the sweeper against GNU parallel, in one script (D13).

Three figures, each measured here, one after the other, on the same containers and masters:

``fleet``      the sweeper (``fleet.roles.sweeper.tick`` with ``apply=True``, repeated until every
               issue launched) launching ``--count`` eligible issues over the harness's workers.
               Every guarantee is on: the dispatch path's checks, the fleet lock held across the
               duplicate probe and the claim (D4), the unit-name claim by ``systemd-run --user``.
               The clock covers the ticks only: setup and filing the issues are outside it, the
               first SSH connections (and the OnFailure notifier install) are inside.
``parallel``   GNU parallel, ``--sshlogin`` with the same masters, ``-M`` (connection reuse),
               running ``true`` ``--count`` times: the raw remote-exec ceiling.
``parallel-unit``  the same, each job starting a real unit (``systemd-run --user --collect
               -p Type=exec true``): what one transient unit per job costs without any guard.

Payload ``noop`` (default): the unit exits at once (the master's python wrapper answers
``-m fleet.runner`` with exit 0, see bench/harness_fleet.py), so the fleet's units are the same
no-op as parallel's jobs and the runs do not compete with the launches for the two cores.
Payload ``runner`` launches the real runner with the demo agent's ``demo:no-op`` mode.

The three run in turn, ``--rounds`` times, on one board; the rates and CPU figures reported are the
medians over the rounds and the ratio is the median of the rounds' ratios, so a burst of load from
elsewhere on a shared box lands on one round rather than on one contender.

Guard-to-launch: ``DispatchResult.timings`` (``probe_to_live_s``: from the duplicate probe under
the lock to the unit being live; ``lock_held_s``) of every launch of the sweep — where a launch
waits for the claims before it in its batch — and of ``--guard`` hand dispatches, ``dispatch()``
one at a time on an idle fleet.

    PYTHONPATH=. python bench/launch_bench.py [--count 200] [--containers 4] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness_fleet import BenchFleet, container_cpu_ns, harness_up, quantile, setup
from fleet.context import FleetContext
from fleet.dispatch import DispatchResult, dispatch
from fleet.roles.sweeper import tick
from fleet.testing import harness
from fleet.trace import Trace
from fleet.views.progress import Meter

MAX_TICKS = 20  # every tick launches what it planned; a refusal (e.g. a lock timeout) re-plans
PARALLEL_TIMEOUT_S = 600.0  # 200 jobs ran in ~10 s here; this only stops a wedged parallel


def endpoints_for(info: harness.HarnessInfo, containers: int) -> tuple[harness.Endpoint, ...]:
    """The masters of the first ``containers`` containers (w4 brings two: alpha and beta)."""
    names = [c.name for c in info.containers][:containers]
    return tuple(ep for ep in info.endpoints() if ep.container.name in names)


# --- fleet ------------------------------------------------------------------------------------------


def _cpu_s() -> float:
    """This process's CPU and its waited-for children's (parallel, ssh): the controller side."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def _worker_cpu_s(info: harness.HarnessInfo, before: dict[str, int]) -> float:
    after = container_cpu_ns(info)
    return sum(after[k] - before[k] for k in before) / 1e9


def run_fleet(bf: BenchFleet, count: int) -> dict[str, object]:
    label = ["demo:no-op"] if bf.payload == "runner" else []
    numbers = [
        bf.board.create_issue(f"bench launch {i}", "no-op", labels=label) for i in range(count)
    ]
    launched: dict[int, DispatchResult] = {}
    refused: list[str] = []
    ticks = 0
    trace = Trace(bf.root / "state" / "trace.jsonl")
    with FleetContext(bf.inventory, bf.board, stderr=sys.stderr) as ctx:
        workers0 = container_cpu_ns(bf.info)
        cpu0, t0 = _cpu_s(), time.monotonic()
        while len(launched) < count and ticks < MAX_TICKS:
            ticks += 1
            report = tick(ctx, apply=True, trace=trace)
            for r in report.results:
                if r.launched:
                    launched[r.issue] = r
                    # A no-op unit leaves no marker: take the issue off the queue, so the next
                    # tick (there is one only after a refusal) does not launch it twice.
                    if bf.payload == "noop":
                        bf.board.set_status(r.issue, "Done")
                else:
                    refused.append(r.line())
            if not report.results:
                break
        wall, cpu = time.monotonic() - t0, _cpu_s() - cpu0
        worker_cpu = _worker_cpu_s(bf.info, workers0)
    missing = sorted(set(numbers) - set(launched))
    probe = [r.timings["probe_to_live_s"] for r in launched.values()]
    held = [r.timings["lock_held_s"] for r in launched.values()]
    # One lock hold per batch, and every launch of a batch reports that hold and its preflight.
    batches = {
        (r.timings["lock_held_s"], r.timings.get("preflight_s", 0.0), r.timings.get("batch", 1))
        for r in launched.values()
    }
    return {
        "batches": len(batches),
        "batch_size": summary([b[2] for b in batches]),
        "batch_preflight_s": summary([b[1] for b in batches]),
        "batch_lock_held_s": summary([b[0] for b in batches]),
        "launched": len(launched),
        "refused": len(refused),
        "refusals": refused[:5],
        "missing": missing[:10],
        "ticks": ticks,
        "wall_s": wall,
        "rate": len(launched) / wall,
        "controller_cpu_s": cpu,
        "worker_cpu_s": worker_cpu,
        "probe_to_live_s": summary(probe),
        "lock_held_s": summary(held),
        "per_worker": {
            w: sum(1 for r in launched.values() if r.worker == w)
            for w in sorted({r.worker or "" for r in launched.values()})
        },
    }


# The floor of guard-to-launch (issue 13): on the master the dispatch went to, over the fleet's
# own connection to it, already open — one unit-list probe and one unit start, nothing else.
FLOOR_PROBE = "systemctl --user list-units 'task-*' --all --plain --no-legend --full"


def floor_start(k: int) -> str:
    return f"systemd-run --user --quiet --unit=fleet-floor-{os.getpid()}-{k} --collect -p Type=exec true"


def run_guard(bf: BenchFleet, count: int) -> dict[str, object]:
    """Guard-to-launch of the hand path: ``dispatch()`` one issue at a time on an idle fleet, the
    worker chosen by dispatch itself, so every figure is one probe under the lock and one claim;
    after each, the floor on the same master (:data:`FLOOR_PROBE` + :func:`floor_start`)."""
    numbers = [bf.board.create_issue(f"bench guard {i}", "no-op") for i in range(count)]
    probe: list[float] = []
    held: list[float] = []
    floor: list[float] = []
    refused: list[str] = []
    with FleetContext(bf.inventory, bf.board, stderr=sys.stderr) as ctx:
        dispatch(ctx, bf.board.create_issue("bench guard warm-up", "no-op"))  # connections
        for k, n in enumerate(numbers):
            r = dispatch(ctx, n)
            if not r.launched:
                refused.append(r.line())
                continue
            probe.append(r.timings["probe_to_live_s"])
            held.append(r.timings["lock_held_s"])
            w = ctx.worker(r.worker or "")
            assert w is not None
            t = ctx.transport(w)
            t0 = time.monotonic()
            listed, started = t.run(FLOOR_PROBE, timeout=30), t.run(floor_start(k), timeout=30)
            floor.append(time.monotonic() - t0)
            if not (listed.ok and started.ok):
                raise RuntimeError(f"the floor's commands failed on {w.name}: {started.stderr}")
    return {
        "dispatches": count,
        "refused": len(refused),
        "refusals": refused[:5],
        "probe_to_live_s": summary(probe),
        "lock_held_s": summary(held),
        "floor_s": summary(floor),
    }


def summary(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    return {"median": statistics.median(xs), "p95": quantile(xs, 0.95), "max": max(xs)}


# --- GNU parallel -----------------------------------------------------------------------------------


def ssh_wrapper(info: harness.HarnessInfo, eps: tuple[harness.Endpoint, ...], where: Path) -> Path:
    """An ssh_config naming each master, and a ONE-word ``--ssh`` wrapper: GNU parallel 20221122
    with ``-M`` and a multi-word ``--ssh`` duplicates jobs and hangs (docs/facts.md). Host keys
    are verified against the harness's known_hosts, as the fleet's own connections are."""
    lines = []
    for ep in eps:
        lines += [
            f"Host {ep.name}",
            "  HostName 127.0.0.1",
            f"  Port {ep.port}",
            f"  User {ep.master}",
            f"  IdentityFile {info.key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {info.known_hosts}",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
            "  BatchMode yes",
        ]
    cfg = where / "ssh_config"
    cfg.write_text("\n".join(lines) + "\n")
    wrapper = where / "ssh"
    wrapper.write_text(f'#!/bin/sh\nexec ssh -F {shlex.quote(str(cfg))} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def unit_job(round_: int) -> str:
    """parallel's job for ``parallel-unit``: one transient unit, named per round and job."""
    return f"systemd-run --user --quiet --unit=pbench-{round_}-{{}} --collect -p Type=exec true"


def run_parallel(
    info: harness.HarnessInfo,
    eps: tuple[harness.Endpoint, ...],
    count: int,
    *,
    job: str = "true",
    jobs: str | None = None,
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="fleet-bench-parallel-") as tmp:
        wrapper = ssh_wrapper(info, eps, Path(tmp))
        argv = ["parallel", "--will-cite", "--halt", "now,fail=1", "--ssh", str(wrapper)]
        argv += ["-S", ",".join(ep.name for ep in eps), "-M"]
        if jobs:
            argv += ["-j", jobs]
        argv += [job, ":::", *map(str, range(1, count + 1))]
        workers0 = container_cpu_ns(info)
        cpu0, t0 = _cpu_s(), time.monotonic()
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PARALLEL_TIMEOUT_S, check=False
        )
        wall, cpu = time.monotonic() - t0, _cpu_s() - cpu0
        worker_cpu = _worker_cpu_s(info, workers0)
    if proc.returncode != 0:
        raise RuntimeError(f"parallel exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return {
        "jobs": count,
        "wall_s": wall,
        "rate": count / wall,
        "controller_cpu_s": cpu,
        "worker_cpu_s": worker_cpu,
        "argv": shlex.join(argv[:9]),
    }


# --- main -------------------------------------------------------------------------------------------


def _median_of(rounds: list[dict[str, object]], key: str) -> dict[str, object]:
    """The last round's details, with the rate and the CPU figures the medians over the rounds."""
    runs = [r[key] for r in rounds]
    out = dict(runs[-1])  # type: ignore[call-overload]
    for field in ("rate", "controller_cpu_s", "worker_cpu_s", "wall_s"):
        out[field] = statistics.median(float(r[field]) for r in runs)  # type: ignore[index]
    out["rates"] = [float(r["rate"]) for r in runs]  # type: ignore[index]
    return out


def bench(
    count: int,
    containers: int,
    payload: str,
    parallel_jobs: str | None,
    guard: int,
    rounds: int = 3,
) -> dict[str, object]:
    """``rounds`` rounds of fleet, parallel, parallel-unit in turn on one board; medians reported,
    so a burst of load from elsewhere on a shared box lands on one round, not on one contender."""
    info = harness_up()
    eps = endpoints_for(info, containers)
    bf = setup(info, payload=payload, workers=tuple(ep.name for ep in eps), tag="launch")
    out: dict[str, object] = {
        "count": count,
        "containers": containers,
        "masters": [ep.name for ep in eps],
        "payload": payload,
    }
    done: list[dict[str, object]] = []
    with Meter("launch bench: rounds", total=rounds, out=sys.stderr) as meter:
        for i in range(rounds):
            meter.update(i, f"round {i + 1}: fleet, GNU parallel, parallel + unit")
            f = run_fleet(bf, count)
            p = run_parallel(info, eps, count, jobs=parallel_jobs)
            u = run_parallel(info, eps, count, job=unit_job(i), jobs=parallel_jobs)
            done.append(
                {
                    "fleet": f,
                    "parallel": p,
                    "parallel_unit": u,
                    "ratio": f["rate"] / p["rate"],  # type: ignore[operator]
                    "ratio_unit": f["rate"] / u["rate"],  # type: ignore[operator]
                    "load_avg": os.getloadavg(),
                }
            )
        meter.update(rounds, "done")
    out["rounds"] = done
    for key in ("fleet", "parallel", "parallel_unit"):
        out[key] = _median_of(done, key)
    out["ratio"] = statistics.median(float(r["ratio"]) for r in done)  # type: ignore[arg-type]
    out["ratio_unit"] = statistics.median(float(r["ratio_unit"]) for r in done)  # type: ignore[arg-type]
    if guard:
        out["guard"] = run_guard(bf, guard)
    out["load_avg"] = os.getloadavg()
    return out


def show(out: dict[str, object]) -> None:
    fleet, par, unit = out["fleet"], out["parallel"], out["parallel_unit"]
    assert isinstance(fleet, dict) and isinstance(par, dict) and isinstance(unit, dict)
    print(
        f"launch rate, {out['count']} no-op issues over {len(out['masters'])} masters "  # type: ignore[arg-type]
        f"({out['containers']} containers), payload {out['payload']}"
    )
    for i, r in enumerate(out["rounds"]):  # type: ignore[arg-type]
        print(
            f"  round {i + 1}: fleet {r['fleet']['rate']:5.1f}/s  parallel "
            f"{r['parallel']['rate']:5.1f}/s  parallel+unit {r['parallel_unit']['rate']:5.1f}/s  "
            f"ratios {r['ratio']:.2f} {r['ratio_unit']:.2f}  (load {r['load_avg'][0]:.1f})"
        )
    print(
        f"  fleet sweeper   {fleet['rate']:6.1f} launches/s  median ({fleet['launched']} launched, "
        f"{fleet['refused']} refused, {fleet['ticks']} tick(s) in the last round)"
    )
    print(f"  GNU parallel -M {par['rate']:6.1f} jobs/s      median")
    print(f"  parallel + unit {unit['rate']:6.1f} jobs/s      median")
    n = float(out["count"])  # type: ignore[arg-type]
    for name, d in (("fleet", fleet), ("parallel", par), ("parallel+unit", unit)):
        ctl, wrk = d["controller_cpu_s"] / n * 1000, d["worker_cpu_s"] / n * 1000
        print(f"  CPU per launch {name:>13}: controller {ctl:6.1f} ms   workers {wrk:6.1f} ms")
    print(
        f"  ratio fleet/parallel {out['ratio']:.2f}   fleet/parallel+unit {out['ratio_unit']:.2f}"
        "  (medians of the rounds' ratios)"
    )
    for name in ("probe_to_live_s", "lock_held_s"):
        s = fleet[name]
        if s:
            print(
                f"  {name:>16}: median {s['median'] * 1000:6.1f} ms  p95 {s['p95'] * 1000:6.1f} ms"
                f"  max {s['max'] * 1000:6.1f} ms"
            )
    size, pre, hold = fleet["batch_size"], fleet["batch_preflight_s"], fleet["batch_lock_held_s"]
    if size:
        print(
            f"  {fleet['batches']} batches, median {size['median']:.0f} launches each: checks "
            f"before the lock median {pre['median']:.2f} s, lock held median {hold['median']:.2f} s"
        )
    for line in fleet["refusals"]:
        print(f"  refused: {line}")
    guard = out.get("guard")
    if isinstance(guard, dict):
        print(f"  guard-to-launch, dispatch() one at a time ({guard['dispatches']} dispatches):")
        for name in ("probe_to_live_s", "lock_held_s"):
            s = guard[name]
            if s:
                print(
                    f"  {name:>16}: median {s['median'] * 1000:6.1f} ms"
                    f"  p95 {s['p95'] * 1000:6.1f} ms  max {s['max'] * 1000:6.1f} ms"
                )
        s = guard["floor_s"]
        if s:
            print(
                f"  {'floor':>16}: median {s['median'] * 1000:6.1f} ms  p95 {s['p95'] * 1000:6.1f}"
                f" ms  (one unit-list probe + one unit start, same master, open connection)"
            )
        for line in guard["refusals"]:
            print(f"  refused: {line}")
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in out['load_avg'])}")  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200, help="issues (and parallel jobs)")
    p.add_argument("--containers", type=int, default=4, choices=(1, 2, 3, 4))
    p.add_argument("--payload", default="noop", choices=("noop", "runner"))
    p.add_argument("--parallel-jobs", default=None, help="parallel -j (default: its own)")
    p.add_argument(
        "--guard", type=int, default=50, help="dispatch() calls for guard-to-launch (0: none)"
    )
    p.add_argument("--rounds", type=int, default=3, help="fleet/parallel rounds, in turn")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args(argv)
    out = bench(
        args.count, args.containers, args.payload, args.parallel_jobs, args.guard, args.rounds
    )
    show(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    every = all(r["fleet"]["launched"] == args.count for r in out["rounds"])  # type: ignore[attr-defined]
    return 0 if every and all(met for _, _, met in goals(out)) else 1


# Issue 13's goals, each a ratio measured in this run.
GOAL_RATE = 1.0  # launch rate against GNU parallel -M running `true` on the same masters
GOAL_GUARD_P50 = 1.5  # hand path guard-to-launch p50, in floors (the floor's median)
GOAL_GUARD_P95 = 2.5  # and p95


def goals(out: dict[str, object]) -> list[tuple[str, float, bool]]:
    """(what, ratio, met) for each goal this run measured; printed, and the exit status."""
    rows = [("launch rate / parallel", float(out["ratio"]), float(out["ratio"]) >= GOAL_RATE)]  # type: ignore[arg-type]
    guard = out.get("guard")
    if isinstance(guard, dict) and guard["floor_s"] and guard["probe_to_live_s"]:
        base = guard["floor_s"]["median"]
        p50 = guard["probe_to_live_s"]["median"] / base
        p95 = guard["probe_to_live_s"]["p95"] / base
        rows += [
            ("guard-to-launch p50 / floor", p50, p50 <= GOAL_GUARD_P50),
            ("guard-to-launch p95 / floor", p95, p95 <= GOAL_GUARD_P95),
        ]
    for what, ratio, met in rows:
        print(f"  goal {what:>28}: {ratio:5.2f}  {'met' if met else 'MISSED'}")
    return rows


if __name__ == "__main__":
    sys.exit(main())
