"""``fleet-status --watch``: the same content as ``fleet-status``, redrawn until interrupted.

On a terminal it is redrawn in place (rich ``Live``, cropped to the screen like ``watch(1)``), with a
header saying when it was read and how to stop. Anywhere else (a pipe, a file, a journal) each read
is printed as plain lines under a header line, so a log of it reads top to bottom. Every redraw is a
fresh read — one board read and one probe, as ``fleet-status`` costs — so ``--every`` is bounded
below. A read that fails is shown in place of the status and the watch goes on: a view must outlive
the outage it is there to show.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from fleet.safe_text import printable

MIN_EVERY_S = 1.0  # each redraw reads the board once: below this a GitHub budget drains for a view
DEFAULT_EVERY_S = 10.0


def frame(read: Callable[[], str], every: float, now: datetime) -> str:
    stamp = now.isoformat(timespec="seconds")
    try:
        body = read()
    except Exception as exc:  # the view outlives the outage it shows
        body = f"fleet-status could not be read: {type(exc).__name__}: {exc}"
    return f"fleet-status at {stamp}, every {every:g}s (Ctrl-C stops)\n{body}"


def watch(
    read: Callable[[], str],
    every: float,
    *,
    out: TextIO | None = None,
    tty: bool | None = None,
    count: int | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Redraw until Ctrl-C (or ``count`` frames); returns the number of frames drawn."""
    out = out or sys.stdout
    every = max(MIN_EVERY_S, every)
    tty = out.isatty() if tty is None else tty
    drawn = 0
    try:
        if tty:
            console = Console(file=out, force_terminal=True)
            with Live(console=console, auto_refresh=False, vertical_overflow="crop") as live:
                while count is None or drawn < count:
                    live.update(
                        Text(printable(frame(read, every, clock()), lines=True)), refresh=True
                    )
                    drawn += 1
                    if count is None or drawn < count:
                        time.sleep(every)
        else:
            while count is None or drawn < count:
                out.write(printable(frame(read, every, clock()), lines=True) + "\n\n")
                out.flush()
                drawn += 1
                if count is None or drawn < count:
                    time.sleep(every)
    except KeyboardInterrupt:
        pass
    return drawn
