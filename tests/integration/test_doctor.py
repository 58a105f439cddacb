"""``invoke doctor`` on real parts (#11): green on the embedded default; names the broken piece
when a worker's sshd is down or the agent is off the unit's PATH; writes nothing but one
fixture-labelled probe, closed again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke.exceptions import Exit as InvokeExit

from fleet.cmd.doctor import doctor
from fleet.core.exits import Exit
from fleet.core.model import IssueState
from fleet.doctor.checks import Options, run
from fleet.inventory import default_path
from fleet.inventory_builder import InventoryData
from tests.integration.fleet_fixture import ghost, make_fleet

pytestmark = pytest.mark.timeout(120)


def _by_check(findings):
    return {f.check: f for f in findings}


def test_green_on_the_embedded_default_and_only_the_probe_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = make_fleet(tmp_path)
    doctor(str(f.inventory_path), True, True)  # raises on any failure
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ok"] is True
    names = {c["check"] for c in out["checks"]}
    assert {"inventory", "board: read", "board: label, comment, close", "worker w1: reach",
            "worker w1: agent", "worker w1: target clone", "worker w1: disk"} <= names  # fmt: skip
    (probe,) = f.board.list_issues()  # type: ignore[attr-defined]
    assert probe.state is IssueState.CLOSED
    assert probe.labels == (f.inventory.policy.fixture_label,)
    assert len(probe.comments) == 1
    doctor(str(f.inventory_path), False, False)  # --no-probe: nothing written at all
    assert len(f.board.list_issues()) == 1  # type: ignore[attr-defined]
    f.ctx.close()


def test_names_a_worker_whose_sshd_is_down_and_an_agent_off_path(tmp_path: Path) -> None:
    def broken(data: InventoryData, root: Path) -> None:
        data["workers"][0]["agent"] = "no-such-agent-cli --flag"
        data["workers"].append(ghost(root, clone="/tmp/ghost-clone"))

    f = make_fleet(tmp_path, edit=broken)
    f.ctx.close()
    found = _by_check(run(str(f.inventory_path), default_path(), Options(probe=False)))
    assert not found["worker ghost: reach"].ok
    assert found["worker ghost: reach"].reason == "unreachable"
    assert "sshd" in found["worker ghost: reach"].fix
    agent = found["worker w1: agent"]
    assert (agent.ok, agent.reason) == (False, "agent-not-on-path")
    assert "no-such-agent-cli" in agent.detail and "path_prefix" in agent.fix
    assert found["worker w1: disk"].ok and found["board: read"].ok  # the rest still checked
    with pytest.raises(InvokeExit) as failed:
        doctor(str(f.inventory_path), False, False)
    assert failed.value.code == Exit.DOCTOR_FAILED
    assert "worker ghost: reach" in str(failed.value.message)


def test_a_broken_inventory_is_one_named_failure(tmp_path: Path) -> None:
    bad = tmp_path / "inventory.yaml"
    bad.write_text("board: {kind: local\n", encoding="utf-8")
    (finding,) = run(str(bad), default_path(), Options())
    assert (finding.check, finding.ok, finding.reason) == ("inventory", False, "inventory-invalid")
    assert str(bad) in finding.detail


def test_an_unopenable_board_still_gets_every_worker_checked(tmp_path: Path) -> None:
    f = make_fleet(tmp_path)
    f.ctx.close()
    text = f.inventory_path.read_text(encoding="utf-8")
    f.inventory_path.write_text(text.replace("board.sqlite3", "no-such-board.sqlite3"), "utf-8")
    found = _by_check(run(str(f.inventory_path), default_path(), Options()))
    assert found["board"].reason == "board-unopenable"
    assert found["worker w1: reach"].ok and found["worker w1: agent"].ok
    assert "board: identity" not in found  # a board check is not run against no board
