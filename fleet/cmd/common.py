"""What every command needs: the inventory loaded with a clean error, the board, the context."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit as InvokeExit

from fleet.board import open_board
from fleet.board.base import BoardError
from fleet.context import FleetContext
from fleet.exits import Exit
from fleet.inventory import Inventory, InventoryError, default_path, load


def fail(code: Exit, message: str) -> InvokeExit:
    """The one place a command turns a named failure into a process exit (STYLE lesson 4)."""
    return InvokeExit(message, code=int(code))


def inventory(path: str | None) -> Inventory:
    try:
        return load(Path(path) if path else default_path())
    except InventoryError as exc:
        raise fail(Exit.INVENTORY, str(exc)) from None
    except FileNotFoundError as exc:
        raise fail(Exit.INVENTORY, f"inventory not found: {exc.filename}") from None


def context(path: str | None, *, create: bool = False) -> FleetContext:
    inv = inventory(path)
    try:
        board = open_board(inv, create=create)
    except BoardError as exc:
        raise fail(Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
    return FleetContext(inv, board)


def emit_json(obj: Any) -> None:
    """One JSON object as the last line of stdout, for scripts."""
    print(json.dumps(obj, sort_keys=True, default=str))
    sys.stdout.flush()
