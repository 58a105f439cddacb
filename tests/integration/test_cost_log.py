"""Every sweep prices its read (D1) and ``fleet-status --cost`` shows it: real board, real sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.cmd.status import status
from fleet.core import cost
from fleet.roles.sweeper import tick
from fleet.trace import read_trace
from tests.integration.fleet_fixture import Fleet

pytestmark = pytest.mark.timeout(120)


def test_each_sweep_records_its_read_cost_and_status_prints_it(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    for k in range(3):
        fleet.board.create_issue(f"item {k}", labels=["hold"])
    tick(fleet.ctx, apply=False)
    tick(fleet.ctx, apply=False)
    log = Path(fleet.inventory.state_dir) / cost.LOG_NAME
    cycles = cost.recorded_cycles(read_trace(log))
    assert len(cycles) == 2 and all(c.unit == "statements" and c.cost > 0 for c in cycles)

    capsys.readouterr()
    status(str(fleet.inventory_path), True, None, show_cost=True)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["cost"]["summary"]["cycles"] == 2
    assert out["cost"]["this_read"]["cost"] == cycles[-1].cost  # same board, same read
    assert out["cost"]["budget"] is None  # SQLite has no rate-limit budget

    status(str(fleet.inventory_path), False, None, show_cost=True)
    assert "last 2 sweeps" in capsys.readouterr().out
