"""D8 under overlap, on real runner processes: who may heal a dark worker, and the canary probe.

Two runs on one worker end in a different order than they started. Each run is the real
``python -m fleet.runner`` (the unit's own argv), against a real SQLite board and bare origin with
the stand-in agent. The order is fixed by a real obstacle, not a sleep: run A's agent blocks reading
a FIFO the test opens only after run B has darkened the worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.core.canary import CANARY_PERIOD_S
from fleet.core.exits import Exit, RunExit
from fleet.core.markers import Kind
from fleet.core.model import Capacity, CapacitySource
from fleet.dispatch import Request, dispatch, dispatch_batch
from fleet.runner.__main__ import REEXEC_ENV
from fleet.runner.capacity import capacity_path, read_capacity, write_capacity
from tests.integration.fleet_fixture import (
    POLL_S,
    RUN_DEADLINE_S,
    fleet_at,
    markers,
    run_runner,
    worker,
)

pytestmark = pytest.mark.timeout(120)


def _gated_agent(gate: Path, gated_issue: int) -> str:
    """The demo agent, except that issue ``gated_issue`` first blocks reading the FIFO ``gate``."""
    demo = f"{sys.executable} -m fleet.agents.demo"
    return f'if [ "$FLEET_ISSUE" = "{gated_issue}" ]; then cat {gate} >/dev/null; fi; exec {demo}'


def _runner(f, issue: int, run_id: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    argv = [sys.executable, "-m", "fleet.runner", "--issue", str(issue), "--worker", "w1"]
    argv += ["--run-id", run_id, "--inventory", str(f.inventory_path)]
    env = {k: v for k, v in os.environ.items() if k not in (REEXEC_ENV, "PYTHONPATH")}
    return subprocess.Popen(
        argv, cwd=f.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_until(what: str, done: Callable[[], bool]) -> None:
    end = time.monotonic() + RUN_DEADLINE_S
    while not done():
        assert time.monotonic() < end, f"not {what} within {RUN_DEADLINE_S}s"
        time.sleep(POLL_S)


def _wait_path(path: Path) -> None:
    _wait_until(f"{path} there", path.exists)


@pytest.mark.slow
def test_a_clean_run_that_started_before_the_worker_went_dark_does_not_heal_it(
    tmp_path: Path,
) -> None:
    gate = tmp_path.resolve() / "gate.fifo"
    os.mkfifo(gate)
    with fleet_at(tmp_path, agent=_gated_agent(gate, 1)) as f:
        a = f.board.create_issue("A: long clean run", "body")
        b = f.board.create_issue("B: meets the limit", "body")
        f.board.add_labels(b, ["demo:rate-limit-unknown"])  # type: ignore[attr-defined]
        cap_file = capacity_path(Path(worker(f).state_dir))
        run_a = _runner(f, a, "run-a")
        try:
            # A's agent is running (its log is opened at step 7, after step 2): A has started.
            _wait_path(Path(worker(f).state_dir) / "runs" / f"{a}-run-a" / "agent.log")
            done_b = run_runner(f, b, "run-b")
            assert done_b.returncode == RunExit.OK, done_b.stderr
            assert markers(f, b)[-1] is Kind.CAPACITY
            dark, _ = read_capacity(cap_file)
            assert dark is not None and dark.source is CapacitySource.RATE_LIMIT
            with open(gate, "w") as fh:  # A may finish now, cleanly, after B darkened the worker
                fh.write("go\n")
            _out_a, err_a = run_a.communicate(timeout=RUN_DEADLINE_S * 2)
        finally:
            if run_a.poll() is None:
                run_a.kill()
        assert run_a.returncode == RunExit.OK, err_a
        assert markers(f, a)[-1] is Kind.SUCCESS, err_a
        still, _ = read_capacity(cap_file)
        assert still == dark, "a run that started before the limit healed the worker"
        assert "before the capacity file" in err_a and "the file stays" in err_a
        # The worker's NEXT clean run — one that started after the file was written — heals it.
        c = f.board.create_issue("C: starts after the darkness", "body")
        done_c = run_runner(f, c, "run-c")
        assert done_c.returncode == RunExit.OK, done_c.stderr
        assert not cap_file.exists(), done_c.stderr
        assert "capacity file" in done_c.stderr and "deleted" in done_c.stderr


def test_no_clean_run_deletes_a_revoked_file(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        cap_file = capacity_path(Path(worker(f).state_dir))
        revoked = Capacity(
            CapacitySource.REVOKED,
            None,
            "OAuth token revoked",
            datetime.now(UTC) - timedelta(hours=1),
            None,
        )
        write_capacity(cap_file, revoked)
        n = f.board.create_issue("A clean run after a revocation", "body")
        done = run_runner(f, n, "run-clean")
        assert done.returncode == RunExit.OK, done.stderr
        assert markers(f, n)[-1] is Kind.SUCCESS
        assert read_capacity(cap_file)[0] == revoked
        assert "says revoked and stays" in done.stderr


def test_a_rate_limit_run_never_downgrades_a_revocation(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        cap_file = capacity_path(Path(worker(f).state_dir))
        revoked = Capacity(CapacitySource.REVOKED, None, "OAuth token revoked", datetime.now(UTC))
        write_capacity(cap_file, revoked)
        n = f.board.create_issue("Meets a rate limit", "body")
        f.board.add_labels(n, ["demo:rate-limit"])  # type: ignore[attr-defined]
        done = run_runner(f, n, "run-limit")
        assert done.returncode == RunExit.OK, done.stderr
        assert markers(f, n)[-1] is Kind.CAPACITY
        assert read_capacity(cap_file)[0] == revoked


def _unknown_reset(age_s: int) -> Capacity:
    at = datetime.now(UTC) - timedelta(seconds=age_s)
    return Capacity(CapacitySource.RATE_LIMIT, None, "You've hit your session limit", at, 7)


def test_an_unknown_reset_is_dark_until_its_canary_period_then_takes_one_run(
    tmp_path: Path,
) -> None:
    gate = tmp_path.resolve() / "gate.fifo"
    os.mkfifo(gate)
    with fleet_at(tmp_path, agent=_gated_agent(gate, 1)) as f:
        cap_file = capacity_path(Path(worker(f).state_dir))
        a = f.board.create_issue("the canary", "body")
        b = f.board.create_issue("a second run while the canary flies", "body")
        write_capacity(cap_file, _unknown_reset(CANARY_PERIOD_S - 60))
        early = dispatch(f.ctx, a, worker="w1")
        assert (early.check, early.code) == (4, Exit.DARK_RATE_LIMIT), early.line()
        assert "canary" in early.reason
        write_capacity(cap_file, _unknown_reset(CANARY_PERIOD_S + 60))
        # Two dispatches in one batch onto the one worker: exactly one is the canary.
        first, second = dispatch_batch(f.ctx, [Request(a, "w1"), Request(b, "w1")])
        try:
            assert first.launched, first.line()
            assert (second.check, second.code) == (4, Exit.DARK_RATE_LIMIT), second.line()
            # And a later dispatch while the canary's unit is live: still one.
            again = dispatch(f.ctx, b, worker="w1")
            assert (again.check, again.code) == (4, Exit.DARK_RATE_LIMIT), again.line()
            _wait_path(Path(worker(f).state_dir) / "runs" / f"{a}-{first.run_id}" / "agent.log")
            stamped, _ = read_capacity(cap_file)
            assert stamped is not None and stamped.canary_at is not None
            with open(gate, "w") as fh:
                fh.write("go\n")
            _wait_until("healed", lambda: not cap_file.exists())
        finally:
            f.stop("w1", a)
        assert not cap_file.exists(), "a clean canary heals the worker"
        assert markers(f, a)[-1] is Kind.SUCCESS
        healed = dispatch(f.ctx, b, worker="w1", dry_run=True)
        assert healed.code is Exit.OK, healed.line()


def test_a_revoked_worker_gets_no_canary_however_old(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        cap_file = capacity_path(Path(worker(f).state_dir))
        old = datetime.now(UTC) - timedelta(seconds=10 * CANARY_PERIOD_S)
        write_capacity(cap_file, Capacity(CapacitySource.REVOKED, None, "revoked", old))
        n = f.board.create_issue("work", "body")
        r = dispatch(f.ctx, n, worker="w1")
        assert (r.check, r.code) == (4, Exit.DARK_REVOKED), r.line()
