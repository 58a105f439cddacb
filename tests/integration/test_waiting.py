"""The runner's wait for its agent (fleet.runner.waiting): the exit code once the agent exits,
None while it runs past the timeout, the same through the polling fallback where no pidfd opens."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from fleet.core.markers import Kind
from fleet.runner import waiting
from fleet.runner.run import agent_timeout
from tests.integration.fleet_fixture import make_fleet, markers, run_runner, set_worker

pytestmark = pytest.mark.timeout(120)
LIMIT_S = 3  # the worker's max_run_s: the runner stops its agent at agent_timeout(3) = 2.4 s


@pytest.fixture(params=["pidfd", "polling"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "polling":

        def no_pidfd(_pid: int) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(waiting.os, "pidfd_open", no_pidfd)
    return str(request.param)


def test_an_exit_is_its_code_and_the_child_is_reaped(how: str) -> None:
    p = subprocess.Popen(["/bin/sh", "-c", "exit 3"])
    assert waiting.exit_within(p, 30.0) == 3
    assert p.returncode == 3
    assert waiting.exit_within(p, 0.0) == 3  # asked again: the code it already has


def test_a_child_running_past_the_timeout_is_none_and_still_running(how: str) -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert waiting.exit_within(p, 0.05) is None
        assert waiting.exit_within(p, 0.0) is None
        assert p.poll() is None
        os.kill(p.pid, signal.SIGKILL)
        assert waiting.exit_within(p, 30.0) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_a_runner_stops_an_agent_past_its_limit_and_names_the_run_timed_out(
    tmp_path: Path,
) -> None:
    # The limit path of the runner's wait: the agent sleeps on (demo:hang); the runner's wait ends
    # at agent_timeout(max_run_s), it stops the agent's group, and the close-out says timed out.
    edit = set_worker(max_run_s=LIMIT_S)
    f = make_fleet(tmp_path, edit=edit)
    try:
        n = f.board.create_issue("Hang", "body", labels=["demo:hang"])
        done = run_runner(f, n, "r-limit")
        assert done.returncode != 0, done.stderr
        assert f"agent passed its run-time limit ({agent_timeout(LIMIT_S):.0f}s)" in done.stderr
        assert markers(f, n) == [Kind.START, Kind.TIMED_OUT]
    finally:
        f.ctx.close()
