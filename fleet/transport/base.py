"""The transport's vocabulary, shared by the local and the SSH carrier: the Protocol a command
runs through, its result, its errors, and the long-lived streams the remote fleet lock holds open.
No I/O library is imported here."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class TransportError(Exception):
    """The command could not be run at all (connect, auth, timeout): nothing ran, claim nothing."""


@dataclass(frozen=True)
class RunResult:
    exit: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit == 0


@runtime_checkable
class Transport(Protocol):
    worker: str

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``command`` (a shell string) on the worker with PATH repaired; never raises on a
        non-zero exit, raises :class:`TransportError` when the command could not be run."""
        ...

    def close(self) -> None: ...


class CommandTimeout(TransportError):
    """The command started but did not finish within its timeout (D20: not the same as a refused
    connection — something may have run). ``partial`` holds what it printed before it was stopped."""

    def __init__(self, message: str, partial: RunResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


# How long close() waits for the far side to exit after its stdin reached EOF. Bounds a process
# that ignores EOF; past it, the process is killed (local) or the channel is dropped (ssh).
STREAM_CLOSE_WAIT_S = 5.0


class Stream(Protocol):
    """A running command: read its output by lines, end its input to let it finish."""

    def read_line(self, timeout: float) -> str | None:
        """The next output line (stdout and stderr combined) without its newline; ``None`` at the
        end of output; raises :class:`TimeoutError` when no full line arrives in ``timeout`` s."""
        ...

    def exit_status(self, timeout: float) -> int | None:
        """The exit status, or ``None`` if it has not exited within ``timeout`` seconds."""
        ...

    def close(self) -> None:
        """End the command's stdin, wait briefly for it to exit, and release everything."""
        ...


@runtime_checkable
class StreamOpener(Protocol):
    def open_stream(self, command: str) -> Stream:
        """Start ``command`` (PATH repaired) with stdin held open; :class:`TransportError` if it
        cannot be started."""
        ...


class LineStream:
    """Line splitting over a ``_recv(timeout) -> bytes`` primitive (``b""`` = end of output)."""

    def __init__(self) -> None:
        self._buf = b""
        self._eof = False

    def _recv(self, timeout: float) -> bytes:
        raise NotImplementedError

    def read_line(self, timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf and not self._eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no output line within {timeout:.3f}s")
            chunk = self._recv(remaining)
            if chunk:
                self._buf += chunk
            else:
                self._eof = True
        if not self._buf:
            return None
        line, _, rest = self._buf.partition(b"\n")
        self._buf = rest
        return line.decode("utf-8", "replace").rstrip("\r")


# run() feeds no input, and says so with EOF: an SSH channel's stdin stays open until the channel
# closes, so anything that read stdin would hang until its timeout. Redirecting in the shell costs
# nothing and makes both carriers alike.
NO_STDIN = "exec </dev/null; "
