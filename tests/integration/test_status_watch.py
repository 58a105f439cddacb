"""``fleet-status --watch`` as a person sees it: redrawn in place in a real terminal (tmux), plain
lines into a pipe, and Ctrl-C ends it cleanly either way."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.integration.fleet_fixture import make_fleet

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60.0  # start-up and one redraw (a board read and a probe): ~2 s idle, ~10 s on a busy box

pytestmark = pytest.mark.timeout(180)


def _env(inventory: Path) -> dict[str, str]:
    env = dict(os.environ, FLEET_INVENTORY=str(inventory))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _cmd(*extra: str) -> list[str]:
    return [sys.executable, "-m", "invoke", "-r", str(REPO), "fleet-status", "--watch", *extra]


def _until(check, what: str):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def fleet(tmp_path):
    f = make_fleet(tmp_path, ("w1",))
    f.board.create_issue("Watch me", "body")
    try:
        yield f
    finally:
        f.ctx.close()


@pytest.mark.slow
def test_in_a_terminal_it_redraws_in_place_until_ctrl_c(fleet, tmp_path):
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed: the terminal path is tested in a real terminal")
    session = f"fleet-watch-{os.getpid()}"
    done = tmp_path / "exit-code"
    shell = " ".join(_cmd("--every", "1")) + f"; echo $? > {done}; sleep 60"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "45", shell],
        env=_env(fleet.inventory_path),
        check=True,
    )
    try:

        def pane() -> str:
            return subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout

        first = _until(lambda: "#1" in pane() and pane(), "the first frame")
        assert "Watch me" in first and "PAUSE       off" in first
        stamp = [ln for ln in first.splitlines() if ln.startswith("fleet-status at ")]
        # the state changes under it: the next frames show it, in the same place
        (fleet.root / "state").mkdir(exist_ok=True)
        (Path(fleet.inventory.state_dir) / "PAUSE").write_text("reason: watching\n")
        later = _until(lambda: "PAUSED" in pane() and pane(), "the pause to show")
        assert later.count("fleet-status at ") == 1 and later.count("switches:") == 1
        assert [ln for ln in later.splitlines() if ln.startswith("fleet-status at ")] != stamp
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        _until(done.exists, "the watch to end")
        assert done.read_text().strip() == "0"
        assert "Traceback" not in pane()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def test_into_a_pipe_it_prints_plain_frames_and_stops_on_sigint(fleet):
    proc = subprocess.Popen(
        _cmd("--every", "1"),
        env=_env(fleet.inventory_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        _until(lambda: sum(ln.startswith("fleet-status at ") for ln in lines) >= 2, "two frames")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT_S)
        reader.join(timeout=WAIT_S)
        err = proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines)
    assert proc.returncode == 0, err
    frames = out.count("fleet-status at ")
    assert frames >= 2 and out.count("switches:") >= frames - 1  # the last may be cut by Ctrl-C
    assert "\x1b[" not in out and "\r" not in out  # no cursor movement: plain lines only
    assert "Traceback" not in err


def test_watch_and_json_together_are_refused(fleet):
    proc = subprocess.run(
        [*_cmd(), "--json"],
        env=_env(fleet.inventory_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--watch" in proc.stderr
