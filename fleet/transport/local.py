"""The local carrier: the worker is this machine (a ``bash -c`` child), with the same PATH repair
and the same command builders as SSH; only the carrier differs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
from collections.abc import Mapping, Sequence

from fleet.transport.base import (
    NO_STDIN,
    STREAM_CLOSE_WAIT_S,
    CommandTimeout,
    LineStream,
    RunResult,
    Stream,
    TransportError,
)
from fleet.transport.shell import env_exports, path_repair

# The shell every local command runs in: the command builders are shared with ssh, whose login
# shell on our workers is bash.
SHELL = "/bin/bash"


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _end(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Kill the command's whole process group (its own session: a child it left behind could hold
    a lock or a pipe) and collect what it printed before, waiting at most STREAM_CLOSE_WAIT_S."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        return proc.communicate(timeout=STREAM_CLOSE_WAIT_S)
    except subprocess.TimeoutExpired:
        # A descendant that left the group (setsid) still holds a pipe and would hold the return
        # for as long as it lives: the pipes are closed on our side, the command itself reaped,
        # and what it printed is given up (subprocess keeps a timed-out read to itself).
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b"", b""


class _ProcessStream(LineStream):
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__()
        self._proc = proc

    def _recv(self, timeout: float) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        poller = select.poll()  # not select: it refuses a descriptor numbered past 1024
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(timeout, 0) * 1000):
            raise TimeoutError(f"no output within {timeout:.3f}s")
        return os.read(fd, 65536)

    def exit_status(self, timeout: float) -> int | None:
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        if self.exit_status(STREAM_CLOSE_WAIT_S) is None:
            # The whole session (its own, see open_stream): a surviving child could hold a lock.
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class LocalTransport:
    """The worker is this machine: a ``bash -c`` child with the same PATH repair as ssh. A plain
    child, not ``invoke.Context.run``: invoke polls its reader threads every 10 ms, which cost
    ~15 ms a command here (bench/cold_bench.py) and every probe of a local worker is one.

    The embedded default (one local worker) goes through here, so the local and remote paths share
    every command builder; only the carrier differs.
    """

    def __init__(
        self,
        worker: str,
        *,
        path_prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.worker = worker
        self.path_prefix = tuple(path_prefix)
        self._repair = path_repair(self.path_prefix)  # validated once, at construction
        self.env = dict(env or {})
        env_exports(self.env)  # reject a bad variable name now, not at the first run

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        full = NO_STDIN + env_exports({**self.env, **(env or {})}) + self._repair + command
        try:
            proc = subprocess.Popen(
                [SHELL, "-c", full],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: a timeout ends all of it
            )
        except OSError as err:
            raise TransportError(
                f"{self.worker}: could not run the command locally: {err}"
            ) from err
        try:
            out, err_out = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err_out = _end(proc)
            partial = RunResult(exit=-signal.SIGKILL, stdout=_text(out), stderr=_text(err_out))
            raise CommandTimeout(
                f"{self.worker}: command timed out after {timeout}s", partial
            ) from None
        except BaseException:
            _end(proc)  # interrupted (Ctrl-C): the command is ours, it does not outlive the wait
            raise
        return RunResult(exit=proc.returncode, stdout=_text(out), stderr=_text(err_out))

    def open_stream(self, command: str) -> Stream:
        full = env_exports(self.env) + self._repair + command
        try:
            proc = subprocess.Popen(
                [SHELL, "-c", full],  # the shell run() uses
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: close() can end all of it
            )
        except OSError as err:
            raise TransportError(f"{self.worker}: could not start a local stream: {err}") from err
        return _ProcessStream(proc)

    def close(self) -> None:
        """Nothing is held open between runs."""
