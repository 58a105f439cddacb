"""The fleet-wide lock: held across the fleet-wide live-unit probe AND the launch (D4).

The zero-entropy unit name refuses a second run on the *same* worker; only a lock held from the
probe through the launch makes the loser's probe see the winner's unit on *any* worker (D4, third
layer; pre-flight check 10). Measured without it: three cross-worker duplicates in ten minutes.

Two outcomes that look alike have two names (D20):

* the lock is **held** by another dispatcher past ``wait_s`` -> :class:`LockTimeout`. That is
  positive evidence that somebody else is launching; the caller refuses with its own code.
* the lock **cannot be taken at all** (unwritable path, read-only fs, EIO, lock host down) ->
  proceed with ``report.acquired = False`` and one warning line on stderr (D5: a guard fails open
  on its own outage, loudly — never silently).

Two carriers: :class:`FleetLock` (portalocker on a file every dispatcher can reach) and
:class:`RemoteFleetLock` (``flock`` on a lock host over SSH, for dispatchers on different machines).
Both are released by the kernel when their holder dies, so a crashed dispatcher leaves no stale lock.
"""

from __future__ import annotations

import dataclasses
import errno as errno_mod
import os
import posixpath
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from fleet.transport import Stream, StreamOpener, TransportError, shell_path

# How long a dispatcher waits behind another before LockTimeout. A probe + launch under the lock
# is seconds (D4 measured the whole guard-to-launch window at 26-27 s in the worst old design), so
# 30 s lets a waiter through behind one launch; longer means the holder is stuck, not busy.
DEFAULT_WAIT_S = 30.0

# Poll step while another process holds the local lock. Bounds the extra wait after a release;
# portalocker's Lock default of 250 ms made waits come in 250 ms steps (docs/facts.md),
# and a lock/unlock attempt costs ~6 µs, so 2 ms of sleep keeps the poll cheap and the wait short.
POLL_S = 0.002

# Extra time, beyond wait_s, for a lock host to answer at all (flock -w bounds the wait itself).
# Bounds a lock host that accepted the session but hangs; same figure as the ssh connect timeout.
REMOTE_ANSWER_SLACK_S = 10.0

HELD_TOKEN = "fleet-lock:held"  # printed by the lock host once flock holds the lock
TIMEOUT_TOKEN = "fleet-lock:timeout"  # printed, followed by the holder, when flock -w gave up
_FLOCK_CONFLICT_EXIT = 75  # EX_TEMPFAIL, via flock -E: "held by another", distinct from errors


@dataclass(frozen=True)
class LockReport:
    acquired: bool
    waited_s: float
    held_s: float | None  # None until the lock is released (or when it was never acquired)
    warning: str | None  # set when the lock failed open (D5)


class LockTimeout(Exception):
    """Another dispatcher held the fleet lock for longer than ``wait_s``: refuse, do not proceed."""

    def __init__(self, path: str, holder: str, waited_s: float) -> None:
        who = holder or "an unrecorded holder"
        super().__init__(f"fleet lock {path} is held by {who}; gave up after {waited_s:.3f}s")
        self.path = path
        self.holder = holder
        self.waited_s = waited_s


def holder_line(now: datetime | None = None) -> str:
    """Who holds the lock: ``pid host time`` (informative only, like rq's lock owner)."""
    at = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    return f"{os.getpid()} {socket.gethostname()} {at}"


class _ReportingLock:
    """The report and the fail-open warning shared by both carriers."""

    def __init__(self, where: str, wait_s: float, stderr: TextIO | None) -> None:
        if wait_s < 0:
            raise ValueError(f"wait_s must be >= 0, got {wait_s}")
        self.where = where
        self.wait_s = wait_s
        self._stderr = stderr
        self.report = LockReport(acquired=False, waited_s=0.0, held_s=None, warning=None)
        self._acquired_at: float | None = None

    def _fail_open(self, started: float, why: str) -> None:
        """D5: proceed without the lock, and say so on one stderr line — never silently."""
        warning = f"fleet: warning: {why}; proceeding WITHOUT the fleet lock (fails open, D5)"
        print(warning, file=self._stderr or sys.stderr, flush=True)
        self.report = LockReport(False, time.monotonic() - started, None, warning)

    def _acquired(self, started: float) -> None:
        self._acquired_at = time.monotonic()
        self.report = LockReport(True, self._acquired_at - started, None, None)

    def _let_go(self) -> None:
        """The carrier's own release; a no-op when nothing is held."""
        raise NotImplementedError

    def __exit__(self, *exc: object) -> None:
        try:
            self._let_go()
        finally:
            self._released()

    def _released(self) -> None:
        if self._acquired_at is not None:
            held = time.monotonic() - self._acquired_at
            self.report = dataclasses.replace(self.report, held_s=held)
            self._acquired_at = None


@contextmanager
def _closed_if_raised(handle: TextIO | Stream) -> Iterator[None]:
    """Close the handle a wait for the lock was using when the wait raises (a timeout, a signal):
    a handle nobody will release must not go on holding, or waiting for, the lock."""
    try:
        yield
    except BaseException:
        handle.close()
        raise


def _errno_text(err: OSError) -> str:
    name = errno_mod.errorcode.get(err.errno or 0, "E?")
    return f"{name} ({err.strerror or err})"


class FleetLock(_ReportingLock):
    """A blocking exclusive lock on a kept-open file, bounded by ``wait_s``.

    ``with FleetLock(path) as lock:`` -> probe the fleet, then launch; ``lock.report`` says whether
    the lock was held. The parent directory is created. After acquiring, ``pid host time`` is
    written into the file so a waiter that times out can name the holder; it is cleared on release.
    """

    def __init__(
        self, path: Path, *, wait_s: float = DEFAULT_WAIT_S, stderr: TextIO | None = None
    ) -> None:
        super().__init__(str(path), wait_s, stderr)
        self.path = Path(path)
        self._fh: TextIO | None = None
        self._writable = False

    def _open(self) -> TextIO:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass  # a non-directory is in the way: os.open below names the real errno (ENOTDIR)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o664)
            self._writable = True
        except PermissionError:
            # Another master created it and we may not write: flock works on a read-only fd, so
            # we still exclude each other; only the holder note is lost.
            fd = os.open(self.path, os.O_RDONLY)
            self._writable = False
        return os.fdopen(fd, "r+" if self._writable else "r", encoding="utf-8")

    def _holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def _same_file(self, fh: TextIO) -> bool:
        """False if the path was replaced while we waited: a lock on a dead inode excludes nobody."""
        try:
            return os.fstat(fh.fileno()).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False

    def __enter__(self) -> FleetLock:
        if self._fh is not None:
            raise RuntimeError(f"fleet lock {self.path} is already held by this object")
        started = time.monotonic()
        deadline = started + self.wait_s
        self.report = LockReport(acquired=False, waited_s=0.0, held_s=None, warning=None)
        while True:
            try:
                fh = self._open()
            except OSError as err:
                self._fail_open(started, f"cannot open fleet lock {self.path}: {_errno_text(err)}")
                return self
            with _closed_if_raised(fh):
                outcome = self._wait_for(fh, deadline, started)
            if outcome == "held":
                self._fh = fh
                self._acquired(started)
                self._write_holder(fh)
                return self
            fh.close()
            if outcome == "failed":
                return self
            # "replaced": the path now names another file; lock that one instead, within wait_s.
            if time.monotonic() >= deadline:
                self._fail_open(started, f"fleet lock {self.path} kept being replaced")
                return self

    def _wait_for(self, fh: TextIO, deadline: float, started: float) -> str:
        """Poll a non-blocking exclusive lock: "held", "failed" (warned) or "replaced";
        raises :class:`LockTimeout` past ``deadline``."""
        # portalocker (and the importlib.metadata it reads at import) only once a lock is taken:
        # a command that never locks — fleet-status, a dry run — starts without it.
        import portalocker

        flags = portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
        while True:
            try:
                portalocker.lock(fh, flags)
                break
            except portalocker.AlreadyLocked:
                if time.monotonic() >= deadline:
                    waited = time.monotonic() - started
                    raise LockTimeout(str(self.path), self._holder(), waited) from None
                time.sleep(POLL_S)
            except portalocker.LockException as err:
                cause = err.__cause__ if isinstance(err.__cause__, OSError) else None
                detail = _errno_text(cause) if cause else str(err)
                self._fail_open(started, f"cannot lock fleet lock {self.path}: {detail}")
                return "failed"
        if not self._same_file(fh):
            portalocker.unlock(fh)
            return "replaced"
        return "held"

    def _write_holder(self, fh: TextIO) -> None:
        if not self._writable:
            return
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(holder_line() + "\n")
            fh.flush()
        except OSError as err:
            # The lock is held; only the informative note failed. Say so, do not drop the lock.
            print(
                f"fleet: warning: holding fleet lock {self.path} but cannot record the holder: "
                f"{_errno_text(err)}",
                file=self._stderr or sys.stderr,
                flush=True,
            )

    def _let_go(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        import portalocker  # already loaded: the lock was taken through it

        try:
            if self._writable:
                try:
                    fh.seek(0)
                    fh.truncate()  # a stale holder note would name a dispatcher that left
                except OSError:
                    pass  # informative only; the unlock below is what matters
            portalocker.unlock(fh)
        finally:
            fh.close()  # closing releases the lock even if unlock raised


def remote_lock_command(path: str, wait_s: float, holder: str) -> str:
    """The lock host's side of :class:`RemoteFleetLock`. Pure.

    ``flock -w`` waits at most ``wait_s``; once held, it records ``holder``, prints
    ``fleet-lock:held`` and holds the lock while ``cat`` reads stdin — closing the channel (or the
    connection dying) ends ``cat`` and releases the lock. If the wait runs out, it prints
    ``fleet-lock:timeout <holder>`` and exits 75; any other failure ends without a token.
    """
    p = shell_path(path)
    parent = posixpath.dirname(path.rstrip("/"))
    mkdir = f"mkdir -p -- {shell_path(parent)} 2>/dev/null; " if parent not in ("", "/") else ""
    inner = (
        f"printf '%s\\n' {shlex.quote(holder)} > {p} 2>/dev/null; echo {HELD_TOKEN}; "
        f"cat >/dev/null; : > {p} 2>/dev/null"
    )
    return (
        f"{mkdir}flock -w {wait_s:.3f} -E {_FLOCK_CONFLICT_EXIT} {p} -c {shlex.quote(inner)}; "
        f"rc=$?; if [ $rc -eq {_FLOCK_CONFLICT_EXIT} ]; then "
        f"printf '%s %s\\n' {TIMEOUT_TOKEN} \"$(head -n 1 {p} 2>/dev/null)\"; fi; exit $rc"
    )


def parse_lock_line(line: str) -> tuple[str, str] | None:
    """``("held", "")``, ``("timeout", holder)``, or ``None`` for any other line (motd noise)."""
    text = line.strip()
    if text == HELD_TOKEN:
        return "held", ""
    if text == TIMEOUT_TOKEN or text.startswith(TIMEOUT_TOKEN + " "):
        return "timeout", text[len(TIMEOUT_TOKEN) :].strip()
    return None


class RemoteFleetLock(_ReportingLock):
    """The fleet lock for dispatchers on different machines: ``flock`` held on a lock host.

    ``opener`` is the lock host's transport (an :class:`~fleet.transport.SSHTransport`; a
    :class:`~fleet.transport.LocalTransport` makes this machine the lock host). The remote flock is
    held for exactly the span of the ``with`` block and released when the stream is closed or the
    connection ends. An unreachable lock host, a missing ``flock``, an unwritable path: fail open
    with a warning (D5), exactly like the local lock.
    """

    def __init__(
        self,
        opener: StreamOpener,
        path: str,
        *,
        wait_s: float = DEFAULT_WAIT_S,
        stderr: TextIO | None = None,
    ) -> None:
        super().__init__(path, wait_s, stderr)
        self.opener = opener
        self.path = path
        self._stream: Stream | None = None

    def __enter__(self) -> RemoteFleetLock:
        if self._stream is not None:
            raise RuntimeError(f"remote fleet lock {self.path} is already held by this object")
        started = time.monotonic()
        self.report = LockReport(acquired=False, waited_s=0.0, held_s=None, warning=None)
        command = remote_lock_command(self.path, self.wait_s, holder_line())
        try:
            stream = self.opener.open_stream(command)
        except TransportError as err:
            self._fail_open(started, f"cannot reach the lock host for {self.path}: {err}")
            return self
        with _closed_if_raised(stream):
            outcome, said = self._await(stream, started)
        if outcome == "held":
            self._stream = stream
            self._acquired(started)
            return self
        stream.close()
        if outcome == "timeout":
            raise LockTimeout(self.path, said, time.monotonic() - started)
        self._fail_open(started, f"cannot take the remote fleet lock {self.path}: {said}")
        return self

    def _await(self, stream: Stream, started: float) -> tuple[str, str]:
        """Read until a token: ("held"|"timeout"|"failed", detail)."""
        deadline = started + self.wait_s + REMOTE_ANSWER_SLACK_S
        noise: list[str] = []
        while True:
            try:
                line = stream.read_line(max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                return "failed", f"the lock host did not answer within {deadline - started:.1f}s"
            except TransportError as err:
                return "failed", str(err)
            if line is None:
                status = stream.exit_status(1.0)
                last = f": {noise[-1]}" if noise else ""
                return "failed", f"the lock host ended without the lock (exit {status}){last}"
            parsed = parse_lock_line(line)
            if parsed is not None:
                return parsed
            if line.strip():
                noise.append(line.strip())

    def _let_go(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()  # EOF on the lock host's stdin: cat ends, flock releases
