"""Run a command on a worker: locally through ``invoke.Context``, remotely through ``fabric.Connection``.

A ``fabric.Connection`` *is* an ``invoke.Context`` with the same ``run()``, so local and remote sit
behind one small Protocol. Every command sent is a shell string whose values were quoted with
``shlex.quote`` by its builder; the transport prepends the PATH repair of pre-flight check 0 (D3).
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import fabric
import invoke
import paramiko

from fleet.model import Reach

if TYPE_CHECKING:
    from fleet.inventory import WorkerConfig


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


# ---------------------------------------------------------------------------------------------
# Shell snippets: pure builders (pre-flight check 0 and check 8)
# ---------------------------------------------------------------------------------------------

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def shell_path(path: str) -> str:
    """Render ``path`` as one shell word: quoted, with a leading ``~`` left for the shell to expand.

    ``~/x`` becomes ``"$HOME"/'x'`` because a quoted ``~`` is never expanded, and the directory must
    be the *worker's* home, not the dispatcher's (D3: tools live under the worker's ``~/.local/bin``).
    Only absolute paths and ``~``/``~/...`` are accepted: a relative PATH entry or ``~user`` would
    silently mean something different on every box.
    """
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"/'
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must be absolute or start with '~/'")
    return shlex.quote(path)


def remote_path(path: str) -> str:
    """A worker-side file path as one shell word: like :func:`shell_path`, except that a relative
    path is allowed and means relative to the master's home, where a non-interactive ssh command
    (and a local command run from home) starts — the inventory's rule for ssh workers' paths."""
    if path == "~" or path.startswith(("~/", "/")):
        return shell_path(path)
    if path.startswith("~"):
        raise ValueError(f"path {path!r}: '~user' means a different home on every box")
    return shlex.quote(path)


def path_repair(prefix: Sequence[str]) -> str:
    """The PATH repair of pre-flight check 0 (D3), as a shell prefix ending in ``export PATH; ``.

    A non-interactive ssh gets a minimal PATH (``jq: command not found``, exit 127), so every
    command a transport sends starts with this. Each directory is an ``if``, never an ``&&`` list:
    under ``set -e`` a failed ``[ -d ]`` in a list exits 1 on every box lacking the directory.
    The first entry of ``prefix`` ends up first on PATH (entries are prepended in reverse).
    An empty prefix repairs nothing and returns ``""``.
    """
    if not prefix:
        return ""
    parts = []
    for directory in reversed(tuple(prefix)):
        word = shell_path(directory)
        parts.append(f'if [ -d {word} ]; then PATH={word}:"$PATH"; fi; ')
    return "".join(parts) + "export PATH; "


def env_exports(env: Mapping[str, str] | None) -> str:
    """``export NAME=value; `` for each entry, values quoted; a bad name is a clear error."""
    if not env:
        return ""
    out = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"environment variable name {name!r} is not a valid shell name")
        out.append(f"export {name}={shlex.quote(value)}; ")
    return "".join(out)


REACH_PREFIX = "fleet-reach:"  # every token line starts with it; nothing else we print does


def reach_token(reach: Reach) -> str:
    """The exact line the worker prints for ``reach`` (UNREACHABLE has no line: it is silence)."""
    if reach is Reach.UNREACHABLE:
        raise ValueError("UNREACHABLE is the absence of a token, it is never printed")
    return REACH_PREFIX + reach.value


_TOKENS = {reach_token(r): r for r in Reach if r is not Reach.UNREACHABLE}


def reach_command(*, state_dir: str, runner_check: str) -> str:
    """Check 8's remote probe: ALWAYS exits 0 and prints exactly one token line, first.

    ssh exits non-zero for its *own* failures too, so the exit status cannot tell "the worker said
    no" from "nothing ran"; the token can. ``no-permission``: ``state_dir`` cannot be created or
    written by this master. ``no-runner``: ``runner_check`` (a shell test command whose values the
    caller quoted, e.g. ``python3 -c 'import fleet.runner'``) fails. The checks' own output is
    discarded so the token is the first line we print; a caller may append its own probe after.
    """
    if not runner_check.strip():
        raise ValueError("runner_check must be a non-empty shell command")
    d = remote_path(state_dir)
    probe = f"{d}/.fleet-reach.$$"
    writable = f"mkdir -p -- {d} && : > {probe} && rm -f -- {probe}"
    return (
        f"if ! {{ {writable}; }} >/dev/null 2>&1; then echo {reach_token(Reach.NO_PERMISSION)}; "
        f"elif ! ( {runner_check}\n) </dev/null >/dev/null 2>&1; then "
        f"echo {reach_token(Reach.NO_RUNNER)}; "
        f"else echo {reach_token(Reach.OK)}; fi; "
    )


_REACH_WHY = {
    Reach.OK: "",
    Reach.NO_PERMISSION: "the state directory cannot be created or written by this master",
    Reach.NO_RUNNER: "the runner check failed on the worker",
}


def parse_reach(result: RunResult | None) -> tuple[Reach, str]:
    """Read check 8's answer. Pure.

    ``None`` (the transport raised) or no token line anywhere in stdout is UNREACHABLE: "no token
    means nothing ran, so no claim may be made" (seed 003, check 8). Lines before the token (a
    motd, a chatty rc file) are tolerated; a token must be a whole line, so an error message that
    merely *mentions* a token is not one. The first token line wins.
    """
    if result is None:
        return Reach.UNREACHABLE, "the transport could not run the probe: nothing ran"
    for line in result.stdout.splitlines():
        reach = _TOKENS.get(line.strip())
        if reach is not None:
            return reach, _REACH_WHY[reach]
    tail = result.stderr.strip().splitlines()
    said = f"; stderr: {tail[-1]}" if tail else ""
    return (
        Reach.UNREACHABLE,
        f"no {REACH_PREFIX} token in the output (exit {result.exit}): nothing ran{said}",
    )


def probe_reach(
    transport: Transport, *, state_dir: str, runner_check: str, timeout: float | None = None
) -> tuple[Reach, str]:
    """Run check 8 through ``transport``; a :class:`TransportError` is UNREACHABLE with its reason."""
    command = reach_command(state_dir=state_dir, runner_check=runner_check)
    try:
        result = transport.run(command, timeout=timeout)
    except TransportError as err:
        return Reach.UNREACHABLE, f"{parse_reach(None)[1]}: {err}"
    return parse_reach(result)


# ---------------------------------------------------------------------------------------------
# Errors beyond TransportError
# ---------------------------------------------------------------------------------------------


class CommandTimeout(TransportError):
    """The command started but did not finish within its timeout (D20: not the same as a refused
    connection — something may have run). ``partial`` holds what it printed before it was stopped."""

    def __init__(self, message: str, partial: RunResult | None = None) -> None:
        super().__init__(message)
        self.partial = partial


# ---------------------------------------------------------------------------------------------
# Streams: a long-lived command whose stdin we hold open (RemoteFleetLock holds flock this way)
# ---------------------------------------------------------------------------------------------

# How long close() waits for the far side to exit after its stdin reached EOF. Bounds a process
# that ignores EOF; past it, the process is killed (local) or the channel is dropped (ssh).
_STREAM_CLOSE_WAIT_S = 5.0


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


class _LineStream:
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


class _ProcessStream(_LineStream):
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
        if self.exit_status(_STREAM_CLOSE_WAIT_S) is None:
            # The whole session (its own, see open_stream): a surviving child could hold a lock.
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


class _ChannelStream(_LineStream):
    def __init__(self, channel: paramiko.Channel) -> None:
        super().__init__()
        self._chan = channel

    def _recv(self, timeout: float) -> bytes:
        self._chan.settimeout(timeout)
        try:
            return self._chan.recv(65536)
        except TimeoutError as err:
            raise TimeoutError(f"no output within {timeout:.3f}s") from err
        except (paramiko.SSHException, OSError, EOFError) as err:
            raise TransportError(f"ssh channel failed: {err}") from err

    def exit_status(self, timeout: float) -> int | None:
        if self._chan.status_event.wait(timeout):
            return self._chan.recv_exit_status()
        return None

    def close(self) -> None:
        try:
            self._chan.shutdown_write()  # EOF on the remote stdin
            self.exit_status(_STREAM_CLOSE_WAIT_S)
        except (paramiko.SSHException, OSError, EOFError):
            pass  # the channel is already gone, which releases the remote side just the same
        finally:
            self._chan.close()


# ---------------------------------------------------------------------------------------------
# Local transport
# ---------------------------------------------------------------------------------------------


# run() feeds no input, and says so with EOF: with in_stream=False invoke/fabric leave the command's
# stdin pipe open forever, so anything that reads stdin would hang until its timeout. Redirecting
# in the shell costs nothing; invoke's own EOF path (an empty in_stream) adds ~7 ms per run.
NO_STDIN = "exec </dev/null; "


def _result(res: invoke.Result) -> RunResult:
    return RunResult(exit=res.exited, stdout=res.stdout, stderr=res.stderr)


def _killed_by_timer(result: RunResult, timeout: float | None, started: float) -> bool:
    """invoke races its own timer: when the kill lands before the timer thread has finished, the
    killed command comes back as a Result (exit -1 from a closed ssh channel, -9 locally) instead
    of CommandTimedOut. Seen here in ~1 of 5 ssh runs. A negative exit past the deadline is that."""
    return timeout is not None and result.exit < 0 and time.monotonic() - started >= timeout


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
                f"{self.worker}: command timed out after {timeout}s", _result(err.result)
            ) from err
        except (OSError, invoke.exceptions.ThreadException) as err:
            raise TransportError(
                f"{self.worker}: could not run the command locally: {err}"
            ) from err
        assert res is not None  # warn=True: invoke returns a Result for every exit status
        result = _result(res)
        if _killed_by_timer(result, timeout, started):
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


# ---------------------------------------------------------------------------------------------
# SSH transport
# ---------------------------------------------------------------------------------------------

# Connect/banner/auth/channel-open bound when the worker does not answer. 10 s is ~50x a measured
# cold login (docs/facts.md: 80-181 ms), so only a dead or wedged worker reaches it.
DEFAULT_CONNECT_TIMEOUT_S = 10.0

_SSH_ERRORS = (paramiko.SSHException, OSError, EOFError, invoke.exceptions.ThreadException)


class SSHTransport:
    """A worker over SSH: one ``fabric.Connection``, opened on first use and reused for every run.

    * Host keys are verified: the given ``known_hosts`` (else ``~/.ssh/known_hosts``) is loaded and
      paramiko's ``RejectPolicy`` refuses an unknown host; a changed key is refused too.
    * The operator's ``~/.ssh/config`` is not read: the inventory is the one source of truth.
    * The TCP socket is connected here with ``TCP_NODELAY``: Nagle plus delayed ACK cost ~40 ms
      per command on an open connection (45 ms vs 13 ms per run, docs/facts.md).
    * Every connect/auth/banner/channel failure is a :class:`TransportError`; a non-zero remote
      exit is a :class:`RunResult`.
    Opening (and closing) is serialized, so threads may share one transport; their runs are
    separate channels on the one connection.
    """

    def __init__(
        self,
        worker: str,
        *,
        host: str,
        port: int,
        user: str,
        key: str | None,
        known_hosts: str | None,
        path_prefix: Sequence[str] = (),
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        if not host:
            raise ValueError(f"worker {worker!r}: an ssh worker needs a host")
        self.worker = worker
        self.host = host
        self.port = int(port)
        self.user = user
        self.key = key
        self.known_hosts = known_hosts
        self.path_prefix = tuple(path_prefix)
        self._repair = path_repair(self.path_prefix)
        self.connect_timeout = connect_timeout
        self._conn: fabric.Connection | None = None
        self._sock: socket.socket | None = None
        self._guard = threading.Lock()  # one connection, even when two threads open it at once

    @property
    def where(self) -> str:
        return f"{self.worker} ({self.user}@{self.host}:{self.port})"

    @property
    def sock(self) -> socket.socket | None:
        """The TCP socket of the open connection, if any (its options are observable)."""
        return self._sock if self._conn is not None else None

    def _open(self) -> fabric.Connection:
        with self._guard:
            if self._conn is not None and self._conn.is_connected:
                return self._conn
            self._drop()
            self._conn, self._sock = self._connect()
            return self._conn

    def _connect(self) -> tuple[fabric.Connection, socket.socket]:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as err:
            raise TransportError(f"{self.where}: cannot connect: {err}") from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        auth: dict[str, object] = (
            {"key_filename": [self.key], "allow_agent": False, "look_for_keys": False}
            if self.key
            else {}
        )
        config = fabric.Config(
            lazy=True,  # no operator invoke/fabric files ...
            ssh_config=paramiko.SSHConfig(),  # ... and no ~/.ssh/config or /etc/ssh/ssh_config
            overrides={"load_ssh_configs": False},
        )
        conn = fabric.Connection(
            self.host,
            user=self.user,
            port=self.port,
            config=config,
            connect_kwargs={
                "sock": sock,
                "banner_timeout": self.connect_timeout,
                "auth_timeout": self.connect_timeout,
                "channel_timeout": self.connect_timeout,
                **auth,
            },
        )
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            known = self.known_hosts
            conn.client.load_system_host_keys(os.path.expanduser(known) if known else None)
        except OSError as err:
            sock.close()
            raise TransportError(f"{self.where}: cannot read known_hosts {known}: {err}") from err
        try:
            conn.open()
        except _SSH_ERRORS as err:
            # fabric's close() skips a connection that never finished opening; the paramiko
            # client's close() stops its transport thread before we close the socket under it.
            conn.client.close()
            sock.close()
            why = type(err).__name__ + (f": {err}" if str(err) else "")
            raise TransportError(f"{self.where}: ssh connect failed: {why}") from err
        return conn, sock

    def run(
        self,
        command: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        # env travels inline (export ...;): sshd drops channel env requests unless AcceptEnv.
        full = NO_STDIN + env_exports(env) + self._repair + command
        conn = self._open()
        started = time.monotonic()
        try:
            res = conn.run(full, hide=True, warn=True, in_stream=False, timeout=timeout)
        except invoke.exceptions.CommandTimedOut as err:
            self.close()  # the channel may still be busy; start clean next time
            raise CommandTimeout(
                f"{self.where}: command timed out after {timeout}s", _result(err.result)
            ) from err
        except _SSH_ERRORS as err:
            self.close()
            raise TransportError(f"{self.where}: ssh run failed: {err}") from err
        assert res is not None  # warn=True: fabric returns a Result for every exit status
        result = _result(res)
        if _killed_by_timer(result, timeout, started):
            self.close()
            raise CommandTimeout(f"{self.where}: command timed out after {timeout}s", result)
        if result.exit < 0:
            # paramiko's -1: the channel closed with no exit status. No remote exit, no RunResult.
            self.close()
            raise TransportError(f"{self.where}: the channel closed without an exit status")
        return result

    def open_stream(self, command: str) -> Stream:
        conn = self._open()
        try:
            assert conn.transport is not None
            chan = conn.transport.open_session(timeout=self.connect_timeout)
            chan.set_combine_stderr(True)
            chan.exec_command(self._repair + command)
        except _SSH_ERRORS as err:
            self.close()
            raise TransportError(f"{self.where}: cannot start an ssh stream: {err}") from err
        return _ChannelStream(chan)

    def close(self) -> None:
        with self._guard:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._sock is not None:
            self._sock.close()
        self._conn, self._sock = None, None


def transport_for(worker: WorkerConfig) -> Transport:
    """The transport an inventory worker names: ``local`` or ``ssh`` (``master`` is the ssh user)."""
    kind = worker.transport
    if kind == "local":
        return LocalTransport(worker.name, path_prefix=worker.path_prefix)
    if kind == "ssh":
        if not worker.master:
            raise ValueError(f"worker {worker.name!r}: an ssh worker needs a master (ssh user)")
        return SSHTransport(
            worker.name,
            host=worker.host or "",
            port=worker.port or 22,
            user=worker.master,
            key=worker.key,
            known_hosts=worker.known_hosts,
            path_prefix=worker.path_prefix,
        )
    raise ValueError(f"worker {worker.name!r}: unknown transport {kind!r} (local or ssh)")
