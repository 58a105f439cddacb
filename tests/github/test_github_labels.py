"""Labels GitHub drops on creation (#11 item 5): without push access GitHub files the issue and
silently drops its labels and assignees. A probe without its fixture label is dispatchable work
(predicate 9): it is closed at once and the command fails with its own code."""

from __future__ import annotations

from pathlib import Path

import pytest
from invoke.exceptions import Exit as InvokeExit

from fleet.board.base import LabelsDropped
from fleet.cmd import board as board_cmd
from fleet.core.exits import Exit
from tests.github.backend import commands_on, github_board
from tests.github.replay import Replayer

pytestmark = pytest.mark.timeout(120)


def test_a_probe_whose_fixture_label_was_dropped_is_closed_and_never_queued() -> None:
    state = Replayer()
    state.push_access = False
    board = github_board(state)
    with pytest.raises(LabelsDropped, match="without label 'fleet-fixture'") as dropped:
        board.create_issue("Probe: throwaway", labels=["fleet-fixture"], assignees=["alice"])
    n = dropped.value.number
    assert dropped.value.missing == ("label 'fleet-fixture'", "assignee 'alice'")
    assert state.issues[n].state == "closed" and state.issues[n].state_reason == "not_planned"
    assert state.issues[n].item_id is None  # it never reached the board, so never the queue
    assert board.read().issues == ()


def test_labels_that_stick_pass_and_a_dropped_probe_fails_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = Replayer(login="fleet")
    inventory = str(commands_on(state, tmp_path, monkeypatch))
    kept = board_cmd.add(inventory, "probe", "", [], None, [], "Todo", True, None)
    assert state.issues[kept].labels == ["fleet-fixture"]
    state.push_access = False
    with pytest.raises(InvokeExit) as refused:
        board_cmd.add(inventory, "probe", "", [], None, [], "Todo", True, None)
    assert refused.value.code == Exit.LABELS_DROPPED
    assert "closed it at once" in str(refused.value.message)
    page = github_board(state).read()
    assert [i.number for i in page.issues] == [kept]  # nothing unlabelled was left behind
