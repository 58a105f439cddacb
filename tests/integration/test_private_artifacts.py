"""Run artifacts are created private (issue 16): issue text, transcripts and the queue's history of
a private repository are not for other local users. Each artifact is made by the production path —
the board by LocalBoard.create, a run by the real runner process, a sweep by the real CLI — from a
test process whose own umask is the usual 022."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.integration.fleet_fixture import fleet_at, fleet_cli, run_runner, worker

pytestmark = pytest.mark.timeout(180)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_the_board_a_run_and_a_sweep_leave_nothing_other_users_can_read(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with fleet_at(tmp_path) as f:
            n = f.board.create_issue("Declare a blocker", "body", labels=["demo:blocker"])
            res = run_runner(f, n, "r1")
            assert res.returncode == 0, res.stderr
            sweep = fleet_cli(f, "schedule")
            assert sweep.returncode == 0, sweep.stderr
            board = f.inventory.board.path
            run_dir = Path(worker(f).state_dir) / "runs" / f"{n}-r1"
            state = Path(f.inventory.state_dir)
            artifacts = [board, *(run_dir / x for x in ("brief.md", "agent.log", "results.json"))]
            artifacts += [p for p in state.iterdir() if p.is_file()]
    finally:
        os.umask(old)
    names = {p.name for p in artifacts}
    assert {"brief.md", "agent.log", "results.json", "trace.jsonl"} <= names, names
    assert any(n.startswith("heartbeat") for n in names), names
    for p in artifacts:
        assert _mode(p) & 0o077 == 0, f"{p} is {_mode(p):o}"
    assert _mode(run_dir) == 0o700
