"""The Board contract suite's "github" backend (tests/contract/conftest.py) on the replayer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleet.board.github import GitHubBoard
from fleet.board.github.features import GITHUB_COM
from fleet.core.model import CIState, Comment, PRState, PullRequest, parse_iso
from tests.github import shape
from tests.github.replay import API, TOKEN, Replayer
from tests.github.replay_state import FakePR, stamp


def github_board(state: Replayer, **kw: Any) -> GitHubBoard:
    """A GitHubBoard wired to ``state``; sleeps are recorded, never slept. The replayer is
    GitHub.com unless it was built on an older schema (then the board asks, as off GitHub.com)."""
    kw.setdefault("sleep", lambda seconds: None)
    kw.setdefault("features", GITHUB_COM if state.schema_path == shape.SCHEMA_PATH else None)
    return GitHubBoard(owner=state.owner, repo=state.repo, project_number=state.project_number,
                       identity=state.login, token=TOKEN, api_url=API, client=state.client(),
                       **kw)  # fmt: skip


@dataclass
class ReplayForge:
    """The contract's Forge on the replayer: PRs, merges and CI are GitHub's side, not the board's."""

    state: Replayer

    def _pr(self, pr: FakePR) -> PullRequest:
        merged = pr.state == "MERGED"
        state = PRState.MERGED if merged else PRState(pr.state.lower())
        return PullRequest(pr.number, pr.title, pr.body, pr.branch, state, merged,
                           parse_iso(stamp(pr.created_at)) or pr.created_at,
                           parse_iso(stamp(pr.merged_at)) if pr.merged_at else None)  # fmt: skip

    def open_pr(self, body: str, *, title: str = "a change") -> PullRequest:
        pr = self.state.open_pr(body)
        pr.title = title
        return self._pr(pr)

    def merge(self, pr: PullRequest) -> PullRequest:
        (fake,) = [p for p in self.state.prs if p.number == pr.number]
        self.state.merge(fake)
        return self._pr(fake)

    def comment_as(self, number: int, body: str, author: str) -> Comment:
        """Written into the replayer the way that human's own client would; the board under test
        never writes as anyone but the fleet."""
        cid = self.state.human_comment(number, author, body)
        at = self.state.issues[number].comments[-1]["at"]
        assoc = self.state.issues[number].comments[-1]["association"]
        return Comment(cid, author, body, parse_iso(stamp(at)) or at, assoc)

    def set_ci(self, state: CIState) -> None:
        conclusion = {CIState.GREEN: "success", CIState.RED: "failure"}.get(state, "pending")
        self.state.ci = (conclusion if conclusion != "pending" else "none", [conclusion])


def contract_backend(tmp: Path) -> tuple[GitHubBoard, ReplayForge]:
    """The production GitHubBoard on the replayer; humans write through the forge."""
    state = Replayer()
    return github_board(state), ReplayForge(state)


def commands_on(state: Replayer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The inventory of an embedded-default fleet (one local worker) whose commands open
    ``state``'s GitHub board — the production GitHubBoard on the replayer. Returns its path."""
    from fleet.cmd import common
    from tests.integration.fleet_fixture import make_fleet

    f = make_fleet(tmp_path)
    f.ctx.close()
    monkeypatch.setattr(common, "open_board", lambda inv, create=False: github_board(state))
    return f.inventory_path
