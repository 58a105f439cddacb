"""The queue and the forge behind one Protocol (see ``base.py``); ``open_board`` picks the backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.board.base import Board, BoardError, BoardPage, BoardUnreadable, BoardWriteError

if TYPE_CHECKING:
    from fleet.inventory import Inventory

__all__ = [
    "Board",
    "BoardError",
    "BoardPage",
    "BoardUnreadable",
    "BoardWriteError",
    "check_identity",
    "open_board",
]


def open_board(inv: Inventory, *, create: bool = False) -> Board:
    """The board the inventory names. ``create`` makes the embedded board and origin if missing."""
    cfg = inv.board
    if cfg.kind == "github":
        import os

        from fleet.board.github import GitHubBoard

        return GitHubBoard.from_env(cfg, os.environ)
    from fleet.board.local import LocalBoard

    assert cfg.path is not None and cfg.origin is not None  # the inventory validates this
    if create:
        return LocalBoard.create(cfg.path, cfg.origin, identity=cfg.identity)
    if not cfg.path.exists():
        # Never start an empty queue on a missing path: a typo in board.path would read as "no
        # work" forever — an idle fleet that is really a broken one (D20).
        raise BoardUnreadable(
            f"no board at {cfg.path}: `invoke board.add` creates the embedded board; "
            "check board.path in the inventory if you expected one"
        )
    return LocalBoard(cfg.path, cfg.origin, identity=cfg.identity)


def check_identity(board: object) -> None:
    """Raise :class:`~fleet.board.base.IdentityMismatch` when the board's credential writes as
    another login than its identity. A board that can tell who its credential is checks it
    (GitHub: ``viewer { login }``); one that writes as any named author (the embedded board) has
    nothing to check."""
    check = getattr(board, "check_identity", None)
    if callable(check):
        check()
