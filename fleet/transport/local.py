"""The local carrier: the worker is this machine (``invoke.Context``), with the same PATH repair
and the same command builders as SSH; only the carrier differs."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

import invoke

from fleet.transport.base import (
    NO_STDIN,
    STREAM_CLOSE_WAIT_S,
    CommandTimeout,
    LineStream,
    RunResult,
    Stream,
    TransportError,
    killed_by_timer,
)
from fleet.transport.shell import env_exports, path_repair


def result_of(res: invoke.Result) -> RunResult:
    return RunResult(exit=res.exited, stdout=res.stdout, stderr=res.stderr)


class _ProcessStream(LineStream):
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__()
        self._proc = proc

    def _recv(self, timeout: float) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
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
    """The worker is this machine: ``invoke.Context().run`` with the same PATH repair as ssh.

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
        # lazy=True: the operator's /etc/invoke.yaml and ~/.invoke.yaml do not change how we run.
        self._ctx = invoke.Context(config=invoke.Config(lazy=True))

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        full = NO_STDIN + env_exports({**self.env, **(env or {})}) + self._repair + command
        started = time.monotonic()
        try:
            res = self._ctx.run(full, hide=True, warn=True, in_stream=False, timeout=timeout)
        except invoke.exceptions.CommandTimedOut as err:
            raise CommandTimeout(
                f"{self.worker}: command timed out after {timeout}s", result_of(err.result)
            ) from err
        except (OSError, invoke.exceptions.ThreadException) as err:
            raise TransportError(
                f"{self.worker}: could not run the command locally: {err}"
            ) from err
        assert res is not None  # warn=True: invoke returns a Result for every exit status
        result = result_of(res)
        if killed_by_timer(result, timeout, started):
            raise CommandTimeout(f"{self.worker}: command timed out after {timeout}s", result)
        return result

    def open_stream(self, command: str) -> Stream:
        full = env_exports(self.env) + self._repair + command
        try:
            proc = subprocess.Popen(
                [self._ctx.config.run.shell, "-c", full],  # the shell run() uses
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
