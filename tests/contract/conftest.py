"""Backends for the Board contract suite.

Each backend is a factory returning a board and a ``Forge``: the few things the contract needs
that the Board Protocol deliberately does not offer (opening and merging a PR, setting CI), done
the way that backend does them. Adding a backend is three lines: its name in ``BACKENDS``, its
factory, and the factory in ``FACTORIES``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleet.board.base import Board
from fleet.board.local import LocalBoard
from fleet.core.model import CIState, Comment, PullRequest
from tests.contract import Forge, push_branch
from tests.github.backend import contract_backend

BACKENDS = ["local", "github"]


@dataclass
class LocalForge:
    """The embedded backend's forge: a real clone-commit-push, then the local forge's PR calls."""

    board: LocalBoard
    workdir: Path
    _seq: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def open_pr(self, body: str, *, title: str = "a change") -> PullRequest:
        n = next(self._seq)
        branch = f"contract/{n}"
        assert self.board.origin is not None
        push_branch(self.board.origin, branch, {f"change-{n}.txt": f"{n}\n"}, self.workdir)
        return self.board.create_pr(branch, title, body)

    def merge(self, pr: PullRequest) -> PullRequest:
        return self.board.merge_pr(pr.number)

    def set_ci(self, state: CIState) -> None:
        self.board.set_ci(state)

    def comment_as(self, number: int, body: str, author: str) -> Comment:
        return self.board.comment(number, body, author=author)


def _local(tmp: Path) -> tuple[Board, Forge]:
    board = LocalBoard.create(tmp / "board.db", tmp / "origin.git")
    return board, LocalForge(board, tmp)


FACTORIES: dict[str, Callable[[Path], tuple[Board, Forge]]] = {
    "local": _local,
    "github": contract_backend,
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Board, Forge]:
    return FACTORIES[request.param](tmp_path)


@pytest.fixture
def board(backend: tuple[Board, Forge]) -> Board:
    return backend[0]


@pytest.fixture
def forge(backend: tuple[Board, Forge]) -> Forge:
    return backend[1]
