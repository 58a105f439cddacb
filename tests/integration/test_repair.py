"""Oldest-wins repair (D4) on real units: two masters on one box — two local workers with their own
state directories, so two portable supervisors, two name registries — each run ``task-N`` for the
same issue, started by hand (``Supervisor.start`` directly, bypassing the fleet lock, as a hand path
would). ``repair --apply`` keeps the older, stops the other's whole process tree, and posts a
``superseded`` marker after the stopped runner's own ``stopped`` marker.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.core.exits import Exit
from fleet.core.markers import Kind, history
from fleet.core.model import Unit, WaitState
from fleet.core.select import select
from fleet.core.sync import parse_sync, sync_command
from fleet.dispatch import new_run_id, runner_argv
from fleet.observe import snapshot
from fleet.roles.repairer import repair
from fleet.trace.replay import replay_file
from fleet.units import procs
from tests.integration.fleet_fixture import Fleet, kinds, make_fleet, wait_for

pytestmark = pytest.mark.timeout(120)

TREE_DEADLINE_S = 30.0  # worktree + demo agent start: ~1 s idle, several on a loaded box


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = make_fleet(tmp_path, ("w1", "w2"))
    try:
        yield f
    finally:
        f.ctx.close()


def hand_start(f: Fleet, worker: str, n: int) -> Unit:
    """What an operator's hand path does: sync the clone, then claim the name on that worker —
    no fleet lock, no fleet-wide probe (the layer D4 says you will miss)."""
    w = f.inventory.worker(worker)
    assert w is not None
    origin = str(f.inventory.board.origin)
    res = f.ctx.transport(w).run(sync_command(w.clone, origin=origin, note="hand"), timeout=60)
    assert parse_sync(res.stdout).synced, res.stdout + res.stderr
    run_id = new_run_id()
    env = {
        "PATH": os.environ["PATH"],
        "FLEET_INVENTORY": str(f.inventory.path),
        "FLEET_RUN_ID": run_id,
    }
    claim = f.ctx.supervisor(w).start(
        n, runner_argv(f.ctx, w, n, run_id), env=env, max_run_s=w.max_run_s
    )
    assert claim.launched and claim.unit is not None, claim.detail
    return claim.unit


def live(f: Fleet, worker: str, n: int) -> list[Unit]:
    w = f.inventory.worker(worker)
    assert w is not None
    return [u for u in f.ctx.supervisor(w).probe() if u.issue == n and u.live]


def tree(f: Fleet, worker: str, n: int) -> set[int]:
    """The unit's supervisor and every process under it (runner, demo agent, its sleep child)."""
    w = f.inventory.worker(worker)
    assert w is not None
    record = json.loads((Path(w.state_dir) / "units" / f"task-{n}.json").read_text())
    root = int(record["supervisor_pid"])
    return {root, *procs.descendants(root)}


def whole_tree(f: Fleet, worker: str, n: int) -> set[int]:
    """Wait (bounded) until the demo agent hangs with its child under the runner: supervisor,
    runner, agent and its ``sleep`` — the start marker comes before the worktree and the agent."""
    end = time.monotonic() + TREE_DEADLINE_S
    while len(pids := tree(f, worker, n)) < 4:
        assert time.monotonic() < end, f"the unit's tree never grew to 4 processes: {pids}"
        time.sleep(0.1)
    return pids


@pytest.mark.slow
def test_repair_keeps_the_older_unit_and_stops_the_other(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    try:
        older = hand_start(fleet, "w1", n)
        wait_for(fleet.board, n, lambda i: kinds(i).count(Kind.START) == 1)
        newer = hand_start(fleet, "w2", n)
        assert newer.start_us > older.start_us  # one kernel, one monotonic clock
        wait_for(fleet.board, n, lambda i: kinds(i).count(Kind.START) == 2)
        doomed = whole_tree(fleet, "w2", n)

        dry = repair(fleet.ctx, apply=False)
        (d,) = dry.decisions
        assert d.keep is not None and (d.keep.worker, [u.worker for u in d.stop]) == ("w1", ["w2"])
        assert "monotonic" in d.why
        assert live(fleet, "w2", n), "a dry run stops nothing"

        report = repair(fleet.ctx, apply=True)
        assert (report.outcome, report.exit) == ("repaired", Exit.OK)
        assert report.stopped == [f"#{n} w2"]
        assert live(fleet, "w2", n) == []
        assert not [p for p in doomed if procs.alive(p)], "the stopped unit's tree survived"
        assert live(fleet, "w1", n), "the older unit must go on"

        issue = wait_for(fleet.board, n, lambda i: Kind.SUPERSEDED in kinds(i), deadline_s=5)
        assert kinds(issue) == [Kind.START, Kind.START, Kind.STOPPED, Kind.SUPERSEDED]
        last = history(issue, "fleet").last_marker
        assert last is not None and last.kind is Kind.SUPERSEDED
        assert (last.get("kept"), last.get("stopped")) == ("w1", "w2")
        # superseded is no latch, and no failure: the kept unit holds the issue as running
        waiting = select(snapshot(fleet.ctx)).reason_for(n)
        assert waiting is not None and waiting.state == WaitState.RUNNING and "w1" in waiting.reason

        assert repair(fleet.ctx, apply=True).outcome == "nothing"  # one unit left: nothing to do
        replayed = replay_file(Path(fleet.inventory.state_dir) / "trace.jsonl")
        assert [r.event for r in replayed.replayed] == ["REPAIR"] * 3
        assert not replayed.differing, replayed.lines()
    finally:
        for w in ("w1", "w2"):
            fleet.stop(w, n)
