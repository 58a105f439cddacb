"""Run step 5 is safe to interrupt, and the next sync prunes what an interrupted add left (D10).

Real git, real runner processes. The window inside ``git worktree add`` is held open by a real
obstacle: the target repository marks one file with a smudge filter, and the worker's clone
configures that filter to block on a FIFO the first time it runs — so the test knows git is midway
through its checkout (the entry locked "initializing") when it sends the signal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.core.markers import Kind
from fleet.core.sync import parse_sync, sync_command
from fleet.runner.__main__ import REEXEC_ENV
from fleet.runner.interrupted import interrupted_entries
from tests.integration.fleet_fixture import (
    POLL_S,
    RUN_DEADLINE_S,
    fleet_at,
    git,
    markers,
    run_runner,
    worker,
)

pytestmark = pytest.mark.timeout(120)


class SlowCheckout:
    """A target repository whose ``slow.txt`` checkout blocks, once, until :meth:`release`."""

    def __init__(self, root: Path, origin: Path, clone: Path) -> None:
        self.entered, self.gate = root / "smudge-entered", root / "smudge-gate.fifo"
        os.mkfifo(self.gate)
        seed = root / "target-seed"
        git("clone", "-q", str(origin), str(seed))
        (seed / ".gitattributes").write_text("slow.txt filter=slow\n", encoding="utf-8")
        (seed / "slow.txt").write_text("slow\n", encoding="utf-8")
        git("add", "-A", cwd=seed)
        git("commit", "-q", "-m", "a file with a slow checkout", cwd=seed)
        git("push", "-q", "origin", "HEAD:main", cwd=seed)
        git("clone", "-q", str(origin), str(clone))
        block = (
            f"if [ ! -e {self.entered} ]; then touch {self.entered}; cat {self.gate} >/dev/null; "
            "fi; cat"
        )
        git("config", "filter.slow.smudge", f"sh -c '{block}'", cwd=clone)
        self.clone = clone

    def wait_entered(self) -> None:
        end = time.monotonic() + RUN_DEADLINE_S
        while not self.entered.exists():
            assert time.monotonic() < end, "git never reached the blocking checkout"
            time.sleep(POLL_S / 4)

    def release(self) -> None:
        with open(self.gate, "w") as fh:
            fh.write("go\n")


def _fetch_ok(clone: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "fetch", "-q", "origin"], cwd=clone, capture_output=True, text=True, timeout=60
    )


def test_a_stop_during_worktree_add_leaves_the_clone_whole(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        slow = SlowCheckout(
            f.root, Path(str(f.inventory.board.origin)), Path(worker(f).clone).resolve()
        )
        n = f.board.create_issue("Add a greeting", "body")
        argv = [sys.executable, "-m", "fleet.runner", "--issue", str(n), "--worker", "w1"]
        argv += ["--run-id", "r-stop5", "--inventory", str(f.inventory_path)]
        env = {k: v for k, v in os.environ.items() if k not in (REEXEC_ENV, "PYTHONPATH")}
        runner = subprocess.Popen(
            argv, cwd=f.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            slow.wait_entered()  # git is inside `worktree add`: the entry is locked "initializing"
            assert interrupted_entries(slow.clone), "the window is not inside worktree add"
            runner.send_signal(signal.SIGTERM)  # a stop, as the supervisor sends it
            time.sleep(POLL_S)  # let the handler run while git is still blocked
            slow.release()
            _out, err = runner.communicate(timeout=RUN_DEADLINE_S)
        finally:
            if runner.poll() is None:
                runner.kill()
        assert interrupted_entries(slow.clone) == [], "a locked worktree entry was left behind"
        assert runner.returncode == -signal.SIGTERM, err  # the signal is re-raised (D12)
        assert "SIGTERM during step 5" in err
        assert markers(f, n) == [Kind.START, Kind.STOPPED]
        assert _fetch_ok(slow.clone).returncode == 0
        assert not list((Path(worker(f).state_dir) / "worktrees").glob(f"{n}-*"))


def _interrupted_add(slow: SlowCheckout, path: Path, *, placeholder_head: bool) -> None:
    """A real ``git worktree add`` killed with SIGKILL midway (its whole process group)."""
    add = subprocess.Popen(
        ["git", "worktree", "add", "--detach", "-q", str(path), "origin/main"],
        cwd=slow.clone,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    slow.wait_entered()
    os.killpg(add.pid, signal.SIGKILL)
    add.wait(timeout=RUN_DEADLINE_S)
    (admin,) = interrupted_entries(slow.clone)
    if placeholder_head:
        # Killed a moment earlier, git has only written its placeholder HEAD: the same entry, with
        # the all-zero id git writes before it sets the real one.
        (admin / "HEAD").write_text("0" * 40 + "\n", encoding="utf-8")


@pytest.mark.skipif(shutil.which("flock") is None, reason="the sync prunes only under the lock")
def test_the_next_sync_prunes_an_interrupted_add(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        origin = Path(str(f.inventory.board.origin))
        slow = SlowCheckout(f.root, origin, Path(worker(f).clone).resolve())
        _interrupted_add(slow, f.root / "elsewhere" / "wt-killed", placeholder_head=True)
        broken = _fetch_ok(slow.clone)
        assert broken.returncode != 0 and "bad object" in broken.stderr  # the defect, for real
        done = subprocess.run(
            ["/bin/sh", "-c", sync_command(str(slow.clone), origin=str(origin), note="test")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert parse_sync(done.stdout).synced, (done.stdout, done.stderr)
        assert "removing an interrupted worktree add" in done.stderr
        assert interrupted_entries(slow.clone) == []
        assert _fetch_ok(slow.clone).returncode == 0


def test_the_runner_prunes_an_interrupted_add_before_its_own(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        origin = Path(str(f.inventory.board.origin))
        slow = SlowCheckout(f.root, origin, Path(worker(f).clone).resolve())
        ours = Path(worker(f).state_dir).resolve() / "worktrees" / "9-killed"
        _interrupted_add(slow, ours, placeholder_head=True)
        n = f.board.create_issue("Add a greeting", "body")
        done = run_runner(f, n, "r-after")
        assert done.returncode == 0, done.stderr
        assert markers(f, n) == [Kind.START, Kind.SUCCESS]
        assert "removed an interrupted worktree add" in done.stderr
        assert "half-made checkout" in done.stderr and not ours.exists()
        assert interrupted_entries(slow.clone) == []
