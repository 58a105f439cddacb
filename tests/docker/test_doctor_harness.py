"""``invoke doctor`` on the four-worker Docker harness (#11): green on a working fleet, and it
names the broken piece when one worker's sshd is stopped and another's agent is off the unit's
PATH — while the other workers still pass."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML

from fleet.doctor.checks import Options, run
from fleet.inventory import default_path
from fleet.testing import harness
from tests.docker.faults_support import docker


def _failures(findings):
    return {f.check: f for f in findings if not f.ok}


def test_doctor_green_on_the_harness_then_names_a_stopped_sshd_and_a_missing_agent(
    harness_info: harness.HarnessInfo, harness_deploy: Callable[[str], Path], tmp_path: Path
) -> None:
    inventory = harness_deploy("doctor")
    findings = run(str(inventory), default_path(), Options(probe=True))
    assert _failures(findings) == {}
    names = {f.check for f in findings}
    assert "worker w1: lingering" in names and "worker w1: runner clone" in names

    yaml = YAML()
    data = yaml.load(inventory.read_text(encoding="utf-8"))
    data["workers"][1]["agent"] = "no-such-agent-cli -p"
    broken_agent = data["workers"][1]["name"]
    changed = tmp_path / "inventory.yaml"
    with changed.open("w", encoding="utf-8") as fh:
        yaml.dump(data, fh)
    sshd_down = harness.container_name("w3")
    docker("exec", sshd_down, "systemctl", "stop", "ssh")
    try:
        bad = _failures(run(str(changed), default_path(), Options(probe=False)))
    finally:
        docker("exec", sshd_down, "systemctl", "start", "ssh")
    assert bad["worker w3: reach"].reason == "unreachable"
    assert bad[f"worker {broken_agent}: agent"].reason == "agent-not-on-path"
    others = {k for k in bad if not k.startswith(("worker w3:", f"worker {broken_agent}: agent"))}
    assert others == set(), others
