"""The SSH carrier: one verified ``fabric.Connection`` per worker. Only this module imports fabric
and paramiko, so a command that touches no SSH worker never loads them."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Mapping, Sequence

import fabric
import invoke
import paramiko

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


def _exec(chan: paramiko.Channel, command: str, timeout: float | None) -> RunResult:
    """Run ``command`` on a fresh session channel and read both streams to their end.

    A bare channel, not ``fabric.Connection.run``: invoke's runner waits in 10 ms sleeps and reader
    threads, ~10 ms per command on an open connection against ~3 ms for this (docs/performance.md),
    and a claim under the fleet lock pays it on every round trip. The streams are read as they
    arrive (``poll`` on the channel), so a command that fills one cannot block on the other.
    Raises ``TimeoutError(message, partial RunResult)`` past ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    out, err = bytearray(), bytearray()

    def partial() -> RunResult:
        return RunResult(-1, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))

    def left() -> float | None:
        if deadline is None:
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no end within {timeout}s", partial())
        return remaining

    def drain() -> None:
        while chan.recv_ready():
            out.extend(chan.recv(65536))
        while chan.recv_stderr_ready():
            err.extend(chan.recv_stderr(65536))

    chan.exec_command(command)
    # poll, not select: select refuses a descriptor numbered past 1024, and a dispatcher probing
    # hundreds of workers at once holds more than that (each channel's wake-up is a pipe).
    poller = select.poll()
    poller.register(chan.fileno(), select.POLLIN)
    while not (chan.eof_received or chan.closed):
        drain()
        remaining = left()
        poller.poll(None if remaining is None else remaining * 1000)
    drain()  # what arrived before the EOF
    # The exit status follows the EOF on the wire; a channel closed without one sets the same
    # event, its status left at -1.
    if not chan.status_event.wait(left()):
        raise TimeoutError(f"no exit status within {timeout}s", partial())
    code = chan.recv_exit_status()
    return RunResult(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class _ChannelStream(LineStream):
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
            self.exit_status(STREAM_CLOSE_WAIT_S)
        except (paramiko.SSHException, OSError, EOFError):
            pass  # the channel is already gone, which releases the remote side just the same
        finally:
            self._chan.close()


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
        try:
            assert conn.transport is not None
            chan = conn.transport.open_session(timeout=self.connect_timeout)
        except _SSH_ERRORS as err:
            self.close()
            raise TransportError(f"{self.where}: ssh run failed: {err}") from err
        try:
            result = _exec(chan, full, timeout)
        except TimeoutError as err:
            self.close()  # the channel may still be busy; start clean next time
            partial = err.args[1] if len(err.args) > 1 else None
            raise CommandTimeout(
                f"{self.where}: command timed out after {timeout}s", partial
            ) from err
        except _SSH_ERRORS as err:
            self.close()
            raise TransportError(f"{self.where}: ssh run failed: {err}") from err
        finally:
            chan.close()
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
