"""``invoke doctor`` against GitHub's recorded answers (the replayer behind the production board):
the token's login, the Status options, the token file on the worker, the write probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.doctor import checks
from fleet.doctor.checks import Options, run
from fleet.inventory import default_path
from fleet.inventory_builder import InventoryData
from tests.github.backend import github_board
from tests.github.replay import Replayer
from tests.integration.fleet_fixture import make_fleet, set_worker, write_fleet_inventory

pytestmark = pytest.mark.timeout(120)


def _github_fleet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: Replayer, **w1: object
) -> Path:
    """make_fleet's inventory on a GitHub board (the replayer's), ``w1`` more fields of w1."""
    f = make_fleet(tmp_path)
    f.ctx.close()
    token = tmp_path / "token"
    token.write_text("t\n")
    token.chmod(0o600)
    board = {"kind": "github", "owner": "octo-org", "repo": "widgets", "project_number": 1,
             "identity": "fleet-bot", "token_file": str(token)}  # fmt: skip

    def on_github(data: InventoryData, root: Path) -> None:
        data["board"] = board
        set_worker("w1", **w1)(data, root)

    write_fleet_inventory(f.root, edit=on_github)
    monkeypatch.setattr(checks, "open_board", lambda inv: github_board(state))
    return f.inventory_path


def test_green_on_github_when_the_setup_is_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = Replayer()
    found = run(str(_github_fleet(tmp_path, monkeypatch, state)), default_path(), Options())
    assert [f for f in found if not f.ok and "target clone" not in f.check] == []
    by = {f.check: f for f in found}
    assert by["worker w1: token file"].ok
    assert "points" in by["board: read"].detail
    (probe,) = state.issues.values()
    assert (probe.state, probe.labels) == ("closed", ["fleet-fixture"])


def test_names_a_token_of_another_login_and_a_missing_status_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = Replayer()
    state.token_login = "someone-else"
    state.status_options = ["Todo", "Done"]
    found = {f.check: f for f in run(str(_github_fleet(tmp_path, monkeypatch, state)),
                                     default_path(), Options())}  # fmt: skip
    ident = found["board: identity"]
    assert (ident.ok, ident.reason) == (False, "login-differs")
    assert "someone-else" in ident.detail
    status = found["board: Status field"]
    assert (status.ok, status.reason) == (False, "option-missing")
    assert "'In progress'" in status.detail
    assert found["board: label, comment, close"].reason == "cannot-file"  # refused, not written
    assert state.issues == {}


def test_names_dropped_labels_and_a_readable_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = Replayer()
    state.push_access = False
    path = _github_fleet(tmp_path, monkeypatch, state)
    (tmp_path / "token").chmod(0o644)
    found = {f.check: f for f in run(str(path), default_path(), Options())}
    assert found["board: label, comment, close"].reason == "labels-dropped"
    assert all(i.state == "closed" for i in state.issues.values())
    assert found["worker w1: token file"].reason == "token-file-readable"


@pytest.mark.parametrize(("agent_token", "ok", "reason"), [
    ("t", False, "same-token"),  # the fleet's own token handed to the agent: it could post markers
    ("agent-token", True, "ok"),
    (None, True, "ok"),  # no agent_token_file: the fleet's token is withheld, nothing handed on
])  # fmt: skip
def test_doctor_fails_when_the_agent_holds_the_token_that_posts_markers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent_token: str | None, ok: bool, reason: str
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    agent = tmp_path / "agent-token"
    if agent_token is not None:
        agent.write_text(agent_token + "\n")
    path = _github_fleet(
        tmp_path, monkeypatch, Replayer(), agent_token_file=None if agent_token is None else agent
    )
    found = {f.check: f for f in run(str(path), default_path(), Options(probe=False))}
    verdict = found["worker w1: agent credential"]
    assert verdict.ok is ok and verdict.reason == reason, verdict
