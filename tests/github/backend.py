"""The Board contract suite's "github" backend (tests/contract/conftest.py) on the replayer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fleet.board.github import GitHubBoard
from fleet.model import CIState, Comment, PRState, PullRequest, parse_iso
from tests.github import shape
from tests.github.replay import API, TOKEN, Replayer
from tests.github.replay_state import FakePR, stamp


def github_board(state: Replayer, **kw: Any) -> GitHubBoard:
    """A GitHubBoard wired to ``state``; sleeps are recorded, never slept."""
    kw.setdefault("sleep", lambda seconds: None)
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

    def set_ci(self, state: CIState) -> None:
        conclusion = {CIState.GREEN: "success", CIState.RED: "failure"}.get(state, "pending")
        self.state.ci = (conclusion if conclusion != "pending" else "none", [conclusion])


class ContractGitHubBoard(GitHubBoard):
    """The GitHubBoard the contract suite runs. One change: a comment by someone other than the
    fleet — the contract's "a human writes" — is written into the replayer the way that human's
    own client would, because one token cannot write as two people (GitHubBoard refuses, D18,
    D20). Every read, and every write as the fleet, is the production path."""

    def __init__(self, state: Replayer) -> None:
        super().__init__(owner=state.owner, repo=state.repo, project_number=state.project_number,
                         identity=state.login, token=TOKEN, api_url=API, client=state.client(),
                         sleep=lambda seconds: None)  # fmt: skip
        self._state = state

    def comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        if author in (None, self.identity):
            return super().comment(number, body)
        cid = self._state.human_comment(number, author, body)
        at = self._state.issues[number].comments[-1]["at"]
        return Comment(cid, author, body, parse_iso(stamp(at)) or at)


def contract_backend(tmp: Path) -> tuple[GitHubBoard, ReplayForge]:
    if not shape.SCHEMA_PATH.exists():
        pytest.skip(shape.SCHEMA_MISSING)
    state = Replayer()
    return ContractGitHubBoard(state), ReplayForge(state)
