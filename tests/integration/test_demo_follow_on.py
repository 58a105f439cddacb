"""`invoke demo`, then the commands a newcomer types next, without a flag, as a person would run
them: a fresh directory holding the committed inventory.yaml, no FLEET_INVENTORY, output to a pipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_S = 400  # the demo bounds itself at 150 s of draining (fleet.demo.DEMO_DEADLINE_S)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(DEMO_TIMEOUT_S + 200)]


def invoke(cwd: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLEET_INVENTORY"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, "-m", "invoke", "-r", str(REPO), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_after_the_demo_the_default_commands_show_its_fleet(tmp_path):
    shutil.copy(REPO / "inventory.yaml", tmp_path / "inventory.yaml")
    before = invoke(tmp_path, "fleet-status")
    assert before.returncode == 50 and "board unreadable" in before.stderr  # nothing there yet

    demo = invoke(tmp_path, "demo", timeout=DEMO_TIMEOUT_S)
    assert demo.returncode == 0, demo.stderr
    # progress on a pipe: plain lines of issues closed of filed, one per change, never a redraw
    drained = [ln for ln in demo.stdout.splitlines() if ln.startswith("demo: drain (issues closed")]
    assert drained and all("/15 [" in ln for ln in drained) and "\r" not in demo.stdout
    page = tmp_path / ".fleet" / "demo" / "state" / "timeline.html"
    assert f"demo: timeline of this run: {page}" in demo.stdout
    assert page.stat().st_size > 5_000 and 'class="run' in page.read_text()

    status = invoke(tmp_path, "fleet-status", "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout.splitlines()[-1])
    assert [w["name"] for w in data["workers"]] == ["local", "local-2", "local-3"]
    assert data["heartbeat"]["outcome"] == "idle" and data["idle"]["idle"] is True
    dark = {w["name"]: w["state"] for w in data["workers"]}
    assert dark == {"local": "healthy", "local-2": "dark", "local-3": "dark"}  # the D8 faults

    listing = invoke(tmp_path, "board.list", "--json")
    assert listing.returncode == 0, listing.stderr
    assert len(json.loads(listing.stdout.splitlines()[-1])["issues"]) == 15

    plan = invoke(tmp_path, "schedule")
    assert plan.returncode == 0 and plan.stdout.startswith("dry run: dispatch=0")

    drawn = invoke(tmp_path, "timeline", "--since", "1h")
    assert drawn.returncode == 0, drawn.stderr
    assert "timeline: 0 runs" not in drawn.stdout and f"wrote {page}" in drawn.stdout
