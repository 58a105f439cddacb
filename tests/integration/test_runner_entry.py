"""The runner's entry point names each way it can end without running (D20), and a dispatch made
with a relative inventory path still hands its unit a path the unit can open."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.exits import RunExit
from fleet.core.markers import Kind
from fleet.dispatch import dispatch
from fleet.inventory import load
from tests.integration.fleet_fixture import has_marker, make_fleet, wait_for

pytestmark = pytest.mark.timeout(120)


def _runner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fleet.runner", "--issue", "1", "--run-id", "r1", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)


def test_a_missing_inventory_or_worker_is_no_config_not_a_stale_clone(tmp_path: Path) -> None:
    missing = _runner("--worker", "w1", "--inventory", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert missing.returncode == RunExit.NO_CONFIG, missing.stderr
    assert "nope.yaml" in missing.stderr
    f = make_fleet(tmp_path)
    f.ctx.close()
    unknown = _runner("--worker", "w9", "--inventory", str(f.inventory_path), cwd=tmp_path)
    assert unknown.returncode == RunExit.NO_CONFIG and "no worker 'w9'" in unknown.stderr


def test_a_relative_inventory_path_reaches_the_unit_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = make_fleet(tmp_path)
    f.ctx.close()
    monkeypatch.chdir(f.root)
    inv = load(os.path.relpath(f.inventory_path))  # as `FLEET_INVENTORY=inventory.yaml` gives it
    assert not Path(inv.path).is_absolute()
    board = open_board(inv)
    n = board.create_issue("Add a greeting")
    with FleetContext(inv, board) as ctx:
        assert dispatch(ctx, n, worker="w1").launched
        wait_for(board, n, has_marker(Kind.SUCCESS))


def test_the_runner_reads_its_own_start_to_a_clock_tick(tmp_path: Path) -> None:
    # D11's no-re-exec rule compares the clone's last move with this start: read a second early,
    # a runner started a second after a move re-executes for nothing; read late, a move after the
    # start could pass as one before it.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    code = "from fleet.runner.__main__ import process_started_at as p; print(p())"
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    after = time.time()
    started = float(out.stdout)
    assert before - 2 * tick <= started <= after, (before, started, after)
