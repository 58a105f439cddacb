"""The token's login against the inventory's identity (#11 item 3): checked once per command that
writes, compared without case as GitHub compares logins, refused with its own exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from invoke.exceptions import Exit as InvokeExit

from fleet.board.base import IdentityMismatch
from fleet.cmd.hygiene import reap_cmd
from fleet.core.exits import Exit, RunExit
from fleet.core.markers import Kind, history, render
from fleet.runner import __main__ as runner_main
from tests.github.backend import commands_on, github_board
from tests.github.replay import Replayer
from tests.integration.fleet_fixture import make_fleet

pytestmark = pytest.mark.timeout(120)


def _viewer_reads(state: Replayer) -> int:
    return sum(1 for doc, _ in state.answers if "query Viewer" in doc)


def test_an_identity_in_another_case_still_owns_its_markers() -> None:
    """GitHub writes as the login's own spelling ("Fleet-Bot"); the inventory says "fleet-bot".
    The fleet must still count its own starts (predicate 7) and see its own start (predicate 6)."""
    state = Replayer(login="fleet-bot")
    state.token_login = "Fleet-Bot"
    board = github_board(state)
    n = board.create_issue("work")
    for run in ("r1", "r2"):
        board.comment(n, render(Kind.START, {"run": run}))
        board.comment(n, render(Kind.FAILED, {"run": run}))
    board.comment(n, render(Kind.START, {"run": "r3"}))
    issue = board.issue(n)
    assert issue is not None and {c.author for c in issue.comments} == {"Fleet-Bot"}
    h = history(issue, "fleet-bot")
    assert h.attempts == 3
    assert h.last_marker is not None and h.last_marker.kind is Kind.START
    assert _viewer_reads(state) == 1  # once per board instance, i.e. once per command


def test_a_token_of_another_login_writes_nothing() -> None:
    state = Replayer(login="fleet-bot")
    n = state.add_issue("work").number
    state.token_login = "someone-else"
    board = github_board(state)
    before = len(state.requests)
    with pytest.raises(IdentityMismatch, match="'someone-else' but the inventory's identity is"):
        board.comment(n, render(Kind.START, {"run": "r1"}))
    with pytest.raises(IdentityMismatch):
        board.close(n)  # the check stays armed: no later write slips through
    assert [p for _, p, _ in state.requests[before:]] == ["/graphql"]  # one viewer read, no write
    assert state.issues[n].comments == [] and state.issues[n].state == "open"


def test_a_writing_command_refuses_with_its_own_code_and_a_dry_run_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = Replayer(login="fleet")
    state.token_login = "not-the-fleet"
    inventory = str(commands_on(state, tmp_path, monkeypatch))
    with pytest.raises(InvokeExit) as refused:
        reap_cmd(inventory, apply=True, as_json=False)
    assert refused.value.code == Exit.IDENTITY_MISMATCH
    assert "not-the-fleet" in str(refused.value.message)
    reap_cmd(inventory, apply=False, as_json=False)  # a dry run writes nothing


def test_the_runner_refuses_before_its_start_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    f = make_fleet(tmp_path)
    f.ctx.close()
    state = Replayer(login="fleet")
    n = state.add_issue("work").number
    state.token_login = "not-the-fleet"
    monkeypatch.setattr(runner_main, "open_board", lambda inv: github_board(state))
    code = runner_main.main(["--inventory", str(f.inventory_path), "--worker", "w1",
                             "--issue", str(n), "--run-id", "r1"])  # fmt: skip
    assert code == RunExit.IDENTITY_MISMATCH
    assert state.issues[n].comments == []
    assert "nothing posted" in capsys.readouterr().err
