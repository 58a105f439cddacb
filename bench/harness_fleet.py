"""A fleet on the four-worker Docker harness, for the benchmarks.

``harness.deploy`` makes a fresh board, origin, inventory and per-board target clones under the
shared directory (the same absolute path on the host and in every worker) and installs on every
master a runner clone of THIS working tree, uncommitted edits included: the runners run the code
being measured. A fresh name per run, so two runs never share a board or a clone.

Payloads. ``runner`` is the real thing: the unit runs ``python -m fleet.runner`` (sync, markers,
worktree, the demo agent, close-out). ``noop`` points the inventory's ``python`` at a wrapper on
each master that answers ``-m fleet.runner`` with exit 0 and runs fleet's interpreter for anything
else, so the unit is the same trivial command GNU parallel runs while every check of the dispatch
path (the probes with check 8's runner test, the lock, check 9's sync, the claim) is unchanged.

``BENCH_PROJECT`` is the Compose project every benchmark uses: other harnesses (tests, faults) run
beside it on the same box and are never touched.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML

from fleet.board import open_board
from fleet.board.base import Board
from fleet.core.model import CIState
from fleet.inventory import Inventory, load
from fleet.testing import harness

REPO = Path(__file__).resolve().parent.parent
BENCH_PROJECT = "fleet-bench"
PAYLOADS = ("noop", "runner")
WORK = "fleet-bench"  # per-master directory for the payload wrapper
SETUP_TIMEOUT_S = 120.0  # one master's bootstrap: a clone of fleet.git over the shared volume


def use_bench_project() -> None:
    """Pin the Compose project before anything asks ``harness.project()``: a benchmark never
    starts, stops or reads another helper's containers."""
    os.environ[harness.PROJECT_ENV] = BENCH_PROJECT


@dataclass(frozen=True)
class BenchFleet:
    info: harness.HarnessInfo
    root: Path  # this run's directory inside the shared directory
    inventory_path: Path
    inventory: Inventory
    board: Board
    payload: str


def wrapper_text(payload: str) -> str:
    """The master's ``python``: fleet's venv interpreter (it imports fleet from the master's runner
    clone, ``harness.install_runner``), except that with ``noop`` a unit's ``-m fleet.runner``
    exits 0 at once."""
    if payload not in PAYLOADS:
        raise ValueError(f"payload must be one of {PAYLOADS}, got {payload!r}")
    noop = (
        "# payload noop: the unit is a no-op, as GNU parallel's job is\n"
        'if [ "$1" = "-m" ] && [ "$2" = "fleet.runner" ]; then exit 0; fi\n'
        if payload == "noop"
        else ""
    )
    return f'#!/bin/sh\n{noop}exec {harness.VENV_PYTHON} "$@"\n'


def master_python(master: str) -> str:
    return f"/home/{master}/{WORK}/bin/python"


def bootstrap_command(payload: str) -> str:
    """Run as each master: stop leftover task units of earlier runs, write the python wrapper."""
    wrapper = shlex.quote(wrapper_text(payload))
    return (
        "systemctl --user stop 'task-*' >/dev/null 2>&1; "
        "systemctl --user reset-failed >/dev/null 2>&1; "
        f'mkdir -p "$HOME/{WORK}/bin" && '
        f"printf '%s' {wrapper} > \"$HOME/{WORK}/bin/python\" && "
        f'chmod 755 "$HOME/{WORK}/bin/python"'
    )


def _bootstrap(info: harness.HarnessInfo, payload: str) -> None:
    command = bootstrap_command(payload)
    for ep in info.endpoints():
        client = harness.connect(info, ep)
        try:
            rc, _, err = harness.run(client, command, timeout=SETUP_TIMEOUT_S)
        finally:
            client.close()
        if rc != 0:
            raise harness.HarnessError(f"bootstrap of {ep.name} exited {rc}: {err.strip()}")


def setup(
    info: harness.HarnessInfo,
    *,
    payload: str,
    workers: tuple[str, ...] | None = None,
    tag: str = "run",
) -> BenchFleet:
    """A fresh board, origin, inventory and target clones (``harness.deploy``), the runner of
    this working tree on every master, and the payload's python wrapper; CI green.

    ``workers`` keeps only those inventory workers (the 1..4-container sweep of the plot).
    """
    name = f"bench-{tag}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    path = harness.deploy(info, name, progress=lambda line: None)
    yaml = YAML()
    data = yaml.load(path.read_text())
    kept = [w for w in data["workers"] if workers is None or w["name"] in workers]
    if payload == "noop":
        for w in kept:
            w["python"] = master_python(w["master"])
    data["workers"] = kept
    with path.open("w") as f:
        yaml.dump(data, f)
    inv = load(path)
    board = open_board(inv)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    _bootstrap(info, payload)
    return BenchFleet(info, path.parent, path, inv, board, payload)


def harness_up() -> harness.HarnessInfo:
    """The bench harness: reused when its four workers run, started otherwise."""
    use_bench_project()
    try:
        info = harness.refresh()
        harness.wait_ready(info)
        return info
    except (harness.HarnessError, FileNotFoundError, KeyError):
        return harness.up()


# --- worker CPU ------------------------------------------------------------------------------------


def container_cpu_ns(info: harness.HarnessInfo) -> dict[str, int]:
    """CPU time each worker container has used so far (ns), from its cgroup on the host."""
    out: dict[str, int] = {}
    for c in info.containers:
        cid = subprocess.run(
            ["docker", "inspect", "-f", "{{.Id}}", c.container],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat")
        if v1.exists():
            out[c.name] = int(v1.read_text())
        elif v2.exists():
            usage = dict(line.split() for line in v2.read_text().splitlines())
            out[c.name] = int(usage["usage_usec"]) * 1000
        else:
            raise harness.HarnessError(f"no cgroup cpu accounting found for {c.container}")
    return out


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
