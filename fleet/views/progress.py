"""Progress on long work (the demo's drain, the harness image build, ``drain --wait``, the benches).

On a terminal: one rich progress line redrawn in place (a bar when the total is known, a spinner
when it is not, the elapsed time, and what is happening now). Anywhere else — a pipe, a journal, CI
— plain lines, one per change of state and never one per poll, so a log stays readable.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Meter:
    """``with Meter("demo: drain", total=15) as m: m.update(done, "sweep 3: launched #4")``."""

    def __init__(
        self,
        title: str,
        *,
        total: int | None = None,
        out: TextIO | None = None,
        tty: bool | None = None,
    ) -> None:
        self.title, self.total = title, total
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self._rich: Progress | None = None
        self._task: TaskID | None = None
        self._last: tuple[int | None, str] | None = None
        self._started = time.monotonic()

    def __enter__(self) -> Meter:
        if self.tty:
            columns = [SpinnerColumn(), TextColumn("{task.description}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            columns += [TimeElapsedColumn(), TextColumn("{task.fields[now]}")]
            console = Console(file=self.out, force_terminal=True)
            self._rich = Progress(*columns, console=console, transient=False)
            self._rich.start()
            self._task = self._rich.add_task(self.title, total=self.total, now="")
        return self

    def update(self, done: int | None = None, now: str = "") -> None:
        """Record progress; a plain line is written only when ``done`` or ``now`` changed."""
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, completed=done, now=now)  # None leaves it as it was
            return
        if (done, now) == self._last:
            return
        self._last = (done, now)
        of = f" {done}/{self.total}" if done is not None and self.total is not None else ""
        elapsed = time.monotonic() - self._started
        self.out.write(f"{self.title}:{of} [{elapsed:.0f}s] {now}".rstrip() + "\n")
        self.out.flush()

    def line(self, text: str) -> None:
        """A line that stays above the progress line (a launch, a warning)."""
        if self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False)
        else:
            self.out.write(text + "\n")
            self.out.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._rich is not None:
            self._rich.stop()
