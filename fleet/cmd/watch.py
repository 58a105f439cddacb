"""``fleet-status --watch``: the same content as ``fleet-status``, redrawn until interrupted.

On a terminal it is redrawn in place (rich ``Live``, cropped to the screen like ``watch(1)``), with a
header saying when it was read and how to stop. Anywhere else (a pipe, a file, a journal) each read
is printed as plain lines under a header line, so a log of it reads top to bottom. Every redraw is a
fresh read — one board read and one probe, as ``fleet-status`` costs — so ``--every`` is bounded
below. A read that fails is shown in place of the status and the watch goes on: a view must outlive
the outage it is there to show.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from types import FrameType
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fleet.core.safe_text import printable

MIN_EVERY_S = 1.0  # each redraw reads the board once: below this a GitHub budget drains for a view
DEFAULT_EVERY_S = 10.0


def frame(read: Callable[[], str], every: float, now: datetime) -> str:
    stamp = now.isoformat(timespec="seconds")
    try:
        body = read()
    except Exception as exc:  # the view outlives the outage it shows
        body = f"fleet-status could not be read: {type(exc).__name__}: {exc}"
    return f"fleet-status at {stamp}, every {every:g}s (Ctrl-C stops)\n{body}"


class Interrupt:
    """Ctrl-C as a request, taken at a safe point. The first SIGINT sets ``requested`` and puts the
    default handler back, so the frame being read finishes (a board read is never cut halfway, with
    its connection's lock still held) and the wait between frames ends at once; a second Ctrl-C
    interrupts whatever is running, for a read that hangs. Off the main thread, where no handler can
    be installed, Ctrl-C stays the plain ``KeyboardInterrupt`` it always is."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._previous: object = None

    def _handle(self, _sig: int, _frame: FrameType | None) -> None:
        self.requested.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True once Ctrl-C was asked for."""
        return self.requested.wait(seconds)


def watch(
    read: Callable[[], str],
    every: float,
    *,
    out: TextIO | None = None,
    tty: bool | None = None,
    count: int | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    interrupt: Interrupt | None = None,
) -> int:
    """Redraw until Ctrl-C (or ``count`` frames); returns the number of frames drawn."""
    out = out or sys.stdout
    every = max(MIN_EVERY_S, every)
    tty = out.isatty() if tty is None else tty
    drawn = 0

    def more() -> bool:  # after a frame: wait for the next one unless done or asked to stop
        if count is not None and drawn >= count:
            return False
        return not stop.wait(every)

    with interrupt or Interrupt() as stop:
        try:
            if tty:
                console = Console(file=out, force_terminal=True)
                with Live(console=console, auto_refresh=False, vertical_overflow="crop") as live:
                    while not stop.requested.is_set():
                        text = Text(printable(frame(read, every, clock()), lines=True))
                        live.update(text, refresh=True)
                        drawn += 1
                        if not more():
                            break
            else:
                while not stop.requested.is_set():
                    out.write(printable(frame(read, every, clock()), lines=True) + "\n\n")
                    out.flush()
                    drawn += 1
                    if not more():
                        break
        except KeyboardInterrupt:  # the second Ctrl-C, inside a read that would not end
            pass
    return drawn
