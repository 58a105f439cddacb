"""``fleet-status`` and ``--cost`` on a GitHub board (the replayer behind the production class):
items the token cannot read are counted and named with their reason and fix (#11 item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.cmd.status import status
from tests.github.backend import commands_on
from tests.github.replay import Replayer

pytestmark = pytest.mark.timeout(120)


def test_status_and_cost_name_the_items_the_token_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    inventory = str(commands_on(state, tmp_path, monkeypatch))
    state.enqueue("POST", "/graphql", "graphql_board_page_partial")
    status(inventory, True, None, show_cost=True)
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [r["issue"] for r in out["items"]] == [7]
    assert out["board_error"] is None
    assert out["skipped"]["count"] == 2
    assert out["skipped"]["reasons"] == {"FORBIDDEN": 1, "SAML": 1}
    assert out["cost"]["skipped"]["count"] == 2

    state.enqueue("POST", "/graphql", "graphql_board_page_partial")
    status(inventory, False, None, show_cost=True)
    text = capsys.readouterr().out
    assert "SKIPPED 2 board item(s) the token cannot read (FORBIDDEN 1, SAML 1)" in text
    assert "SAML single sign-on" in text and "this read's price excludes them" in text


def test_each_sweep_records_how_many_items_it_could_not_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fleet.cmd.sched import schedule
    from fleet.core import cost
    from fleet.inventory import load
    from fleet.trace import read_trace

    state = Replayer(owner="octocat", repo="Hello-World")
    inventory = commands_on(state, tmp_path, monkeypatch)
    state.enqueue("POST", "/graphql", "graphql_board_page_partial")
    schedule(str(inventory), False, True)  # a dry-run sweep over the partial page
    log = Path(load(inventory).state_dir) / cost.LOG_NAME
    (cycle,) = cost.recorded_cycles(read_trace(log))
    assert cycle.skipped == 2
    capsys.readouterr()
    state.enqueue("POST", "/graphql", "graphql_board_page_partial")
    status(inventory, False, None, show_cost=True)
    assert "(2 item(s) unreadable, skipped)" in capsys.readouterr().out
