"""SSHTransport against a real sshd on 127.0.0.1 (started here, on a free port, with temp keys).

Covers: commands and exit codes over one reused connection with TCP_NODELAY; host-key verification
(an unknown or changed key is refused, never added); auth and connect failures as TransportError;
check 8's three tokens over ssh; the remote fleet lock held by flock over ssh (D4) and released
when the connection ends.
"""

from __future__ import annotations

import io
import os
import resource
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.cmd.testdeps import SSH_TESTS_ENV, SSH_TOOLS, SSHD
from fleet.core.model import Reach
from fleet.lock import LockTimeout, RemoteFleetLock
from fleet.transport import (
    CommandTimeout,
    RunResult,
    SSHTransport,
    Transport,
    TransportError,
    probe_reach,
)

START_TIMEOUT_S = 10.0  # bounds sshd start-up (it listens within ~50 ms here)


@dataclass(frozen=True)
class Sshd:
    port: int
    key: str
    known_hosts: str
    wrong_known_hosts: str  # the same host under a different key
    dir: Path

    def transport(self, **over: object) -> SSHTransport:
        kwargs: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "root",
            "key": self.key,
            "known_hosts": self.known_hosts,
            "connect_timeout": 5.0,
        }
        kwargs.update(over)
        return SSHTransport("w-ssh", **kwargs)  # type: ignore[arg-type]


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=10
    )
    return path.with_suffix(".pub").read_text().split()[:2]  # type: ignore[return-value]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    missing = [t.path for t in SSH_TOOLS if not t.present()]
    if missing and os.environ.get(SSH_TESTS_ENV) == "1":  # `invoke test` installed them: a bug
        pytest.fail(f"{', '.join(missing)} missing although `invoke test` installed openssh")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (`invoke test` installs them as root)")
    if os.geteuid() != 0:
        pytest.skip("the test sshd logs in as root and must run as root: ssh tests skipped")
    d = tmp_path_factory.mktemp("sshd")
    host_type, host_key = _keygen(d / "host_key")
    other_type, other_key = _keygen(d / "other_host_key")
    _keygen(d / "client_key")
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    port = _free_port()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_type} {host_key}\n")
    (d / "wrong_known_hosts").write_text(f"[127.0.0.1]:{port} {other_type} {other_key}\n")
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"PidFile {d / 'sshd.pid'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "UsePAM no\nUseDNS no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\n"
        "MaxSessions 20\nMaxStartups 20\nLogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(
        exist_ok=True
    )  # sshd's privilege-separation dir, absent until first use
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=open(d / "sshd.log", "w"),  # noqa: SIM115 - closed with the process below
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert proc.poll() is None, (d / "sshd.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "sshd did not start listening"
                time.sleep(0.02)
        yield Sshd(
            port, str(d / "client_key"), str(d / "known_hosts"), str(d / "wrong_known_hosts"), d
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def ssh(sshd: Sshd) -> Iterator[SSHTransport]:
    t = sshd.transport()
    yield t
    t.close()


def test_runs_commands_over_one_reused_connection_with_nodelay(ssh: SSHTransport) -> None:
    assert isinstance(ssh, Transport)
    first = ssh.run("echo hello; echo oops >&2; exit 3")
    assert first == RunResult(exit=3, stdout="hello\n", stderr="oops\n")
    sock = ssh.sock
    assert sock is not None
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    for _ in range(3):
        assert ssh.run("true").ok
    assert ssh.sock is sock  # one connection reused for every run


def test_a_quoted_argument_survives_the_remote_shell(ssh: SSHTransport, tmp_path: Path) -> None:
    sentinel = tmp_path / "must-not-exist"
    arg = f'it\'s "q"\nline two $(touch {sentinel}) `touch {sentinel}` $HOME ; | &'
    assert ssh.run(f"printf '%s' {shlex.quote(arg)}").stdout == arg
    assert not sentinel.exists()


def test_path_repair_and_env_reach_the_remote_shell(sshd: Sshd, tmp_path: Path) -> None:
    t = sshd.transport(path_prefix=(str(tmp_path), "/no/such/dir"))
    try:
        got = t.run('echo "$PATH"; echo "$X"; cat; echo eof', env={"X": "a b"})
    finally:
        t.close()
    path, x, eof = got.stdout.splitlines()
    assert path.startswith(f"{tmp_path}:") and "/no/such" not in path
    assert (x, eof) == ("a b", "eof")  # and stdin is at EOF, not an open pipe


def test_an_unknown_host_key_is_refused_not_added(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    t = sshd.transport(known_hosts=str(empty))
    with pytest.raises(TransportError, match=r"known_hosts|not found"):
        t.run("true")
    assert empty.read_text() == ""


def test_a_changed_host_key_is_refused(sshd: Sshd) -> None:
    t = sshd.transport(known_hosts=sshd.wrong_known_hosts)
    with pytest.raises(TransportError, match=r"BadHostKey|does not match"):
        t.run("true")


def test_a_wrong_client_key_is_an_auth_failure(sshd: Sshd, tmp_path: Path) -> None:
    _keygen(tmp_path / "stranger")
    t = sshd.transport(key=str(tmp_path / "stranger"))
    with pytest.raises(TransportError, match="Authentication"):
        t.run("true")


def test_a_closed_port_is_a_connect_failure(sshd: Sshd) -> None:
    t = sshd.transport(port=_free_port())
    with pytest.raises(TransportError, match="cannot connect"):
        t.run("true")


def test_a_timeout_is_its_own_error_and_the_next_run_reconnects(ssh: SSHTransport) -> None:
    with pytest.raises(CommandTimeout) as caught:
        ssh.run("echo started; sleep 5", timeout=0.5)
    assert caught.value.partial is not None and "started" in caught.value.partial.stdout
    assert ssh.run("echo back").stdout == "back\n"


def test_the_three_tokens_over_ssh(ssh: SSHTransport, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    state = str(tmp_path / "state")
    assert probe_reach(ssh, state_dir=state, runner_check="test -d /") == (Reach.OK, "")
    assert probe_reach(ssh, state_dir=state, runner_check="false")[0] is Reach.NO_RUNNER
    blocked = str(tmp_path / "file" / "state")
    assert probe_reach(ssh, state_dir=blocked, runner_check="true")[0] is Reach.NO_PERMISSION


def test_no_answer_from_the_worker_is_unreachable(sshd: Sshd) -> None:
    dead = sshd.transport(port=_free_port())
    reach, why = probe_reach(dead, state_dir="/tmp", runner_check="true")
    assert reach is Reach.UNREACHABLE and "cannot connect" in why


def test_remote_lock_over_ssh_excludes_and_names_the_holder(sshd: Sshd, tmp_path: Path) -> None:
    path = str(tmp_path / "locks" / "fleet.lock")
    a, b = sshd.transport(), sshd.transport()
    try:
        with RemoteFleetLock(a, path, wait_s=5) as first:
            assert first.report.acquired
            with pytest.raises(LockTimeout) as caught, RemoteFleetLock(b, path, wait_s=0.3):
                pytest.fail("two holders of the remote lock")
            assert caught.value.holder.split()[:2] == [str(os.getpid()), socket.gethostname()]
        with RemoteFleetLock(b, path, wait_s=2) as second:  # released on exit
            assert second.report.acquired
    finally:
        a.close()
        b.close()


def test_remote_lock_is_released_when_the_connection_ends(sshd: Sshd, tmp_path: Path) -> None:
    path = str(tmp_path / "fleet.lock")
    a, b = sshd.transport(), sshd.transport()
    try:
        held = RemoteFleetLock(a, path, wait_s=5).__enter__()
        assert held.report.acquired
        a.close()  # the dispatcher's connection dies without a clean release
        err = io.StringIO()
        with RemoteFleetLock(b, path, wait_s=5, stderr=err) as lock:
            assert lock.report.acquired, err.getvalue()
    finally:
        a.close()
        b.close()


def test_threads_share_one_connection(sshd: Sshd) -> None:
    t = sshd.transport()  # not yet connected: the threads race to open it
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            seen = list(pool.map(lambda i: (t.run(f"echo {i}").stdout, t.sock), range(8)))
    finally:
        t.close()
    assert [out for out, _ in seen] == [f"{i}\n" for i in range(8)]
    assert len({id(sock) for _, sock in seen}) == 1


def test_a_run_works_with_descriptors_numbered_past_1024(ssh: SSHTransport) -> None:
    """A dispatcher probing hundreds of workers at once holds over 1,024 descriptors; each
    channel's wake-up pipe then numbers past what select() takes (it raised ValueError)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the hard limit on open files is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert ssh.run("echo ok").stdout == "ok\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
