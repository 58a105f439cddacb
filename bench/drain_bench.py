"""End-to-end drain on the Docker harness: demo-agent issues from eligible to merged-and-closed.

``--count`` issues are filed (the demo agent's default mode: edit a file, commit, push a topic
branch, open a PR that closes the issue, merge it), then the sweeper ticks every ``--period``
seconds — every tick one ``fleet.roles.sweeper.tick(apply=True)``, as a timer would run it —
until every issue is closed with a success marker, or ``--deadline`` passes. Everything is real:
systemd user units on four containers over SSH, the runner synced from its clone (D11), the board
and the origin on the host through the shared volume.

Reported, all from this one run: wall time from the first tick to the last issue closed; the
amortized wall time per issue; per issue, from the bench's start to its launch (the trace's
LAND), to the run's start marker, and from the start marker to the success marker (the run: sync,
worktree, agent, close-out); the CPU the workers' containers used (their cgroups) and the CPU of
this controller process, in total and per issue; and the containers' peak memory while draining.

    PYTHONPATH=. python bench/drain_bench.py [--count 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from bench.harness_fleet import BenchFleet, container_cpu_ns, harness_up, quantile, setup
from fleet.context import FleetContext
from fleet.core.markers import TERMINAL, Kind, history
from fleet.core.model import Issue
from fleet.roles.sweeper import tick
from fleet.testing import harness
from fleet.trace import Trace, iter_trace
from fleet.views.progress import Meter

POLL_S = 1.0  # board poll while waiting for the runs
PERIOD_S = 5.0  # between ticks: retries of failed runs are parked 30 s+, so ticks are cheap


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _container_ids(info: harness.HarnessInfo) -> dict[str, str]:
    out = {}
    for c in info.containers:
        out[c.name] = subprocess.run(
            ["docker", "inspect", "-f", "{{.Id}}", c.container],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    return out


def _memory_bytes(ids: dict[str, str]) -> int:
    """Memory the worker containers use now (cgroup v1 usage, or v2 memory.current)."""
    total = 0
    for cid in ids.values():
        for path in (
            Path(f"/sys/fs/cgroup/memory/docker/{cid}/memory.usage_in_bytes"),
            Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/memory.current"),
        ):
            if path.exists():
                total += int(path.read_text())
                break
    return total


def _last_terminal(issue: Issue) -> Kind | None:
    ms = [m for m in history(issue, "fleet").markers if m.kind in TERMINAL]
    return ms[-1].kind if ms else None


def _marker_at(issue: Issue, kind: Kind) -> datetime | None:
    ms = [m for m in history(issue, "fleet").markers if m.kind is kind]
    return ms[-1].at if ms else None


def launch_times(trace: Path | None, wall0: datetime, numbers: set[int]) -> list[float]:
    """Seconds from the start to each issue's first successful dispatch: the engine journals a
    LAND with ``ok`` the moment a dispatch call returns a launch."""
    first: dict[int, float] = {}
    for _, record in iter_trace(trace) if trace else ():
        if record.get("event") == "LAND" and record.get("ok"):
            n = int(record["item"])
            if n in numbers and n not in first:
                first[n] = (datetime.fromisoformat(record["at"]) - wall0).total_seconds()
    return list(first.values())


def summary(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    return {"median": statistics.median(xs), "p95": quantile(xs, 0.95), "max": max(xs)}


def _finished(issue: Issue, mode: str) -> bool:
    """Success mode: merged and closed. Another mode: the run posted its terminal marker."""
    return not issue.is_open if mode == "success" else _last_terminal(issue) is not None


def run_drain(
    bf: BenchFleet, count: int, period: float, deadline: float, mode: str = "success"
) -> dict[str, object]:
    labels = [] if mode == "success" else [f"demo:{mode}"]
    numbers = set(
        bf.board.create_issue(f"bench drain {i}", "Add a line to a note.", labels=labels)
        for i in range(count)
    )
    trace = Trace(bf.root / "state" / "trace.jsonl")
    ids = _container_ids(bf.info)
    ticks, peak_mem = 0, 0
    refusals: dict[str, int] = {}  # "check 9 CLONE_UNSYNCED" -> how many dispatches it refused
    with FleetContext(bf.inventory, bf.board, stderr=sys.stderr) as ctx:
        workers0 = container_cpu_ns(bf.info)
        cpu0 = _cpu_s()
        wall0 = datetime.now().astimezone()
        t0 = time.monotonic()
        next_tick = t0
        closed: dict[int, Issue] = {}
        with Meter(f"drain bench: {mode} issues finished", total=count, out=sys.stderr) as meter:
            while time.monotonic() - t0 < deadline:
                meter.update(len(closed), f"tick {ticks}")
                if time.monotonic() >= next_tick:
                    ticks += 1
                    for r in tick(ctx, apply=True, trace=trace).results:
                        if not r.launched:
                            key = f"check {r.check} {r.code.name}"
                            refusals[key] = refusals.get(key, 0) + 1
                    next_tick = time.monotonic() + period
                peak_mem = max(peak_mem, _memory_bytes(ids))
                for issue in bf.board.list_issues():  # type: ignore[attr-defined]
                    if (
                        issue.number in numbers
                        and _finished(issue, mode)
                        and issue.number not in closed
                    ):
                        closed[issue.number] = issue
                if len(closed) == len(numbers):
                    break
                time.sleep(POLL_S)
            meter.update(len(closed), f"tick {ticks}")
        wall = time.monotonic() - t0
        cpu = _cpu_s() - cpu0
        after = container_cpu_ns(bf.info)
    worker_cpu = sum(after[k] - workers0[k] for k in workers0) / 1e9
    issues = {i.number: i for i in bf.board.list_issues() if i.number in numbers}  # type: ignore[attr-defined]
    outcomes: dict[str, int] = {}
    to_start, run_span, to_closed = [], [], []
    for issue in issues.values():
        kind = _last_terminal(issue)
        key = "closed" if not issue.is_open else "open"
        key += f"/{kind.value if kind else 'no-terminal-marker'}"
        outcomes[key] = outcomes.get(key, 0) + 1
        start = _marker_at(issue, Kind.START)
        end = _marker_at(issue, kind) if kind is not None else None
        if start is not None:
            to_start.append((start - wall0).total_seconds())
        if start is not None and end is not None:
            run_span.append((end - start).total_seconds())
        if issue.closed_at is not None:
            to_closed.append((issue.closed_at - wall0).total_seconds())
    if mode == "success":
        done = sum(
            1 for i in issues.values() if not i.is_open and _last_terminal(i) is Kind.SUCCESS
        )
    else:
        done = sum(1 for i in issues.values() if _finished(i, mode))
    return {
        "count": count,
        "mode": mode,
        "closed_with_success": done,
        "outcomes": outcomes,
        "ticks": ticks,
        "refusals": refusals,
        "check_9_refusals": sum(n for k, n in refusals.items() if k.startswith("check 9 ")),
        "wall_s": wall,
        "per_issue_wall_s": wall / count,
        "issues_per_s": done / wall,
        "eligible_to_launched_s": summary(launch_times(trace.path, wall0, numbers)),
        "eligible_to_start_marker_s": summary(to_start),
        "run_span_s": summary(run_span),
        "eligible_to_closed_s": summary(to_closed),
        "worker_cpu_s": worker_cpu,
        "worker_cpu_per_issue_s": worker_cpu / count,
        "controller_cpu_s": cpu,
        "controller_cpu_per_issue_s": cpu / count,
        "worker_peak_memory_mib": peak_mem / 2**20,
    }


def show(out: dict[str, object]) -> None:
    d = out
    print(
        f"drain: {d['count']} demo-agent issues over {len(d['masters'])} masters "  # type: ignore[arg-type]
        f"({d['containers']} containers), demo mode {d['mode']}: eligible -> "
        + ("merged and closed" if d["mode"] == "success" else "terminal marker")
    )
    print(
        f"  {d['closed_with_success']} finished in {d['wall_s']:.1f} s "
        f"({d['issues_per_s']:.2f} issues/s, {d['per_issue_wall_s']:.2f} s of wall per issue), "
        f"{d['ticks']} tick(s)"
    )
    for name in (
        "eligible_to_launched_s",
        "eligible_to_start_marker_s",
        "run_span_s",
        "eligible_to_closed_s",
    ):
        s = d[name]
        if s:
            print(
                f"  {name:>27}: median {s['median']:7.2f} s  p95 {s['p95']:7.2f} s"  # type: ignore[index]
                f"  max {s['max']:7.2f} s"  # type: ignore[index]
            )
    print(
        f"  worker CPU {d['worker_cpu_s']:.1f} s ({d['worker_cpu_per_issue_s']:.2f} s per issue), "
        f"controller CPU {d['controller_cpu_s']:.1f} s "
        f"({d['controller_cpu_per_issue_s'] * 1000:.0f} ms per issue), "  # type: ignore[operator]
        f"workers' peak memory {d['worker_peak_memory_mib']:.0f} MiB"
    )
    print(f"  outcomes: {d['outcomes']}")
    print(f"  check-9 refusals: {d['check_9_refusals']}; every refusal: {d['refusals'] or 'none'}")
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in d['load_avg'])}")  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200, help="demo-agent issues to drain")
    p.add_argument("--period", type=float, default=PERIOD_S, help="seconds between ticks")
    p.add_argument("--deadline", type=float, default=3600.0, help="give up after this long (s)")
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument(
        "--mode",
        default="success",
        help="the demo agent's mode: success (merge and close) or another demo mode, e.g. no-op "
        "(finished = the run's terminal marker): the runner's own cost without the agent's work",
    )
    args = p.parse_args(argv)
    info = harness_up()
    bf = setup(info, payload="runner", tag="drain")
    out: dict[str, object] = {
        "containers": len(info.containers),
        "masters": [w.name for w in bf.inventory.workers],
    }
    out.update(run_drain(bf, args.count, args.period, args.deadline, args.mode))
    out["load_avg"] = os.getloadavg()
    show(out)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if out["closed_with_success"] == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
