"""What a cycle costs on a GitHub board (#11 item 6): only what can be work is read, so a board's
history of closed and Done items costs nothing. A 500-item board with 50 open items costs what 50
items cost; docs/github.md carries the figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.board.github.features import ServerFeatures
from fleet.cmd.status import status
from tests.github.backend import commands_on, github_board
from tests.github.replay import Replayer

pytestmark = pytest.mark.timeout(120)


def board_of_500_with_50_open() -> Replayer:
    """500 issues on the board, 450 of them closed and Done: a year of a real board."""
    state = Replayer()
    for k in range(500):
        issue = state.add_issue(f"item {k}")
        issue.item_id = f"PVTI_REPLAY{issue.number:05d}"
        if k % 10:
            issue.state, issue.state_reason, issue.fields = (
                "closed",
                "completed",
                {"Status": "Done"},
            )
        else:
            issue.fields = {"Status": "In progress"}
    return state


def test_a_cycle_costs_the_open_items_not_the_board_history() -> None:
    state = board_of_500_with_50_open()
    page = github_board(state).read()  # page_size 50: the production default
    assert len(page.issues) == 50
    assert page.cost == 2  # one page of 50 open items: 201 requests -> 2 points
    everything = github_board(state, features=ServerFeatures(dependencies=True,
                                                             items_filter=False)).read()  # fmt: skip
    assert [i.number for i in everything.issues] == [i.number for i in page.issues]
    assert everything.cost == 20  # what every cycle cost before: ten pages


def test_fleet_status_cost_shows_points_per_cycle_and_per_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = str(commands_on(board_of_500_with_50_open(), tmp_path, monkeypatch))
    status(inventory, True, None, show_cost=True)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["cost"]["this_read"] == {"cost": 2, "unit": "points"}
    assert out["cost"]["per_hour"] == {"cycles": 12.0, "points": 24, "budget": 5000}
    status(inventory, False, None, show_cost=True)
    text = capsys.readouterr().out
    assert "cost: this read 2 points" in text
    assert "per hour: 12 cycles (one per 300s) x 2 = 24 points, 0.5% of GitHub's 5,000" in text
