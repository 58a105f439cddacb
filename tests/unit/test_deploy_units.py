"""The systemd units shipped in deploy/systemd start commands that exist, on the policy's period,
and systemd itself accepts them (``systemd-analyze verify``, where the host has it)."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.cmd.collection import ns
from fleet.core.model import Policy

UNITS = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
ROLES = {"fleet-sweeper": "schedule", "fleet-reaper": "reap", "fleet-announcer": "announce"}


def _unit(name: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    cp.read(UNITS / name)
    return cp


def _seconds(span: str) -> int:
    units = {"s": 1, "min": 60, "h": 3600}
    for suffix, factor in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if span.endswith(suffix):
            return int(span[: -len(suffix)]) * factor
    return int(span)


@pytest.mark.parametrize(("unit", "task"), sorted(ROLES.items()))
def test_each_role_runs_a_task_that_exists_with_apply(unit: str, task: str) -> None:
    argv = shlex.split(_unit(f"{unit}.service")["Service"]["ExecStart"])
    assert argv[0].endswith("/fleet") and argv[1] == task and "--apply" in argv[2:]
    assert task in ns.task_names, f"{unit} runs `fleet {task}`, which does not exist"
    body = ns[task].body
    assert "apply" in body.__code__.co_varnames[: body.__code__.co_argcount]
    service = _unit(f"{unit}.service")
    assert service["Unit"]["OnFailure"] == "fleet-alarm@%n.service"
    assert (UNITS / "fleet-alarm@.service").exists()
    timer = _unit(f"{unit}.timer")["Timer"]
    assert _seconds(service["Service"]["TimeoutStartSec"]) < _seconds(timer["OnUnitInactiveSec"])


def test_the_sweeper_timer_is_the_policy_period() -> None:
    """fleet-status calls a heartbeat stale at twice the policy's period; the timer must match it."""
    period = _unit("fleet-sweeper.timer")["Timer"]["OnUnitInactiveSec"]
    assert _seconds(period) == Policy().timer_period_s


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_accepts_every_unit(tmp_path: Path) -> None:
    for f in UNITS.iterdir():  # %h paths and the env file exist only on an operator's box
        text = f.read_text().replace("%h/.local/bin/fleet", "/bin/true")
        text = text.replace("EnvironmentFile=%h", "EnvironmentFile=-%h")
        (tmp_path / f.name).write_text(
            text.replace("WorkingDirectory=%h/fleet", "WorkingDirectory=/")
        )
    names = [str(tmp_path / f.name) for f in UNITS.iterdir() if "@" not in f.name]
    got = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *names],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    noise = [
        ln for ln in got.stderr.splitlines() if "Unknown" in ln or "nvalid" in ln or "rror" in ln
    ]
    assert got.returncode == 0 and noise == [], got.stderr
