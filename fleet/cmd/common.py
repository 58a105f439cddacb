"""What every command needs: the inventory loaded with a clean error, the board, the context."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit as InvokeExit

from fleet.board import check_identity, open_board
from fleet.board.base import BoardError, IdentityMismatch
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.safe_text import printable
from fleet.inventory import Inventory, InventoryError, default_path, load
from fleet.private import private_umask


def fail(code: Exit, message: str) -> InvokeExit:
    """The one place a command turns a named failure into a process exit (STYLE lesson 4)."""
    return InvokeExit(message, code=int(code))


def inventory(path: str | None) -> Inventory:
    try:
        inv = load(Path(path) if path else default_path())
    except InventoryError as exc:
        raise fail(Exit.INVENTORY, str(exc)) from None
    except FileNotFoundError as exc:
        raise fail(Exit.INVENTORY, f"inventory not found: {exc.filename}") from None
    for warning in inv.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return inv


def context(path: str | None, *, create: bool = False, writes: bool = False) -> FleetContext:
    """The inventory and its board. ``writes``: the command will write to the board, so the
    token's login is checked against ``identity`` first (#11 item 3) and a mismatch refuses the
    command before it does anything, with its own exit code."""
    private_umask()  # briefs, logs, the board, the trace: the fleet's user only (fleet.private)
    inv = inventory(path)
    try:
        board = open_board(inv, create=create)
        if writes:
            check_identity(board)
    except IdentityMismatch as exc:
        raise fail(Exit.IDENTITY_MISMATCH, str(exc)) from None
    except BoardError as exc:
        raise fail(Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
    return FleetContext(inv, board)


@dataclass
class _JsonOut:
    emitted: int = 0


# The ``--json`` command running in this context, so ``json_exits`` knows whether the command
# already printed its object (a refusal prints its own, then exits with its code).
_JSON_OUT: ContextVar[_JsonOut | None] = ContextVar("fleet_json_out", default=None)


def say(text: object, *, file: Any = None) -> None:
    """Print text that may carry board text: controls and bidi characters shown, never obeyed."""
    print(printable(text, lines=True), file=file)


def emit_json(obj: Any) -> None:
    """One JSON object as the last line of stdout, for scripts."""
    print(json.dumps(obj, sort_keys=True, default=str))
    sys.stdout.flush()
    out = _JSON_OUT.get()
    if out is not None:
        out.emitted += 1


def error_json(command: str, code: int, message: str | None) -> dict[str, object]:
    """The object a ``--json`` command prints when it ends without its own: the code it exits
    with, that code's name (fleet/core/exits.py) and the sentence it prints on stderr."""
    try:
        name: str | None = Exit(code).name
    except ValueError:
        name = None  # not one of fleet's codes: 1 is an error that escaped (a traceback follows)
    return {
        "command": command,
        "outcome": "error",
        "code": code,
        "code_name": name,
        "error": message or "",
    }


@contextmanager
def json_exits(command: str) -> Iterator[None]:
    """Around a ``--json`` command: whatever way it ends, exactly one JSON object is the last line
    of stdout, and the exit code is the one it has without ``--json`` (the exception is re-raised
    untouched). A command that printed its own object is left alone."""
    out = _JsonOut()
    token = _JSON_OUT.set(out)
    try:
        yield
    except InvokeExit as exc:
        if not out.emitted:
            emit_json(error_json(command, exc.code, exc.message))
        raise
    except Exception as exc:  # escapes as a traceback, exit 1: the object says so first
        if not out.emitted:
            emit_json(error_json(command, 1, f"crashed: {type(exc).__name__}: {exc}"))
        raise
    else:
        if not out.emitted:
            emit_json({"command": command, "outcome": "done", "code": 0})
    finally:
        _JSON_OUT.reset(token)
