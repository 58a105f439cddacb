"""The cancel window's handshake, forced: two boards that make a dispatcher read the issue while a
cancel holds the fleet lock with its ``cancelled`` marker not yet posted (used by the integration
and the harness tests of the window)."""

from __future__ import annotations

import threading
from pathlib import Path

from fleet.board.local import LocalBoard
from fleet.core.markers import Kind

WAIT_S = 60.0  # each handshake between the two sides; a wedge fails the test instead of hanging


class Window:
    """The two sides' handshake: the cancel is inside the lock, the dispatcher has read."""

    def __init__(self) -> None:
        self.cancel_in_lock = threading.Event()
        self.dispatch_read = threading.Event()


def cancel_board(path: Path, origin: Path | None, w: Window) -> LocalBoard:
    class CancelBoard(LocalBoard):
        def comment(self, number: int, body: str, *, author: str | None = None):  # type: ignore[no-untyped-def]
            if f"fleet:{Kind.CANCELLED.value}" in body:
                w.cancel_in_lock.set()
                assert w.dispatch_read.wait(WAIT_S), "the dispatcher never read the issue"
            return super().comment(number, body, author=author)

    return CancelBoard(path, origin)


def dispatch_board(path: Path, origin: Path | None, w: Window) -> LocalBoard:
    class DispatchBoard(LocalBoard):
        def issue(self, number: int):  # type: ignore[no-untyped-def]
            got = super().issue(number)
            w.dispatch_read.set()
            return got

    return DispatchBoard(path, origin)
