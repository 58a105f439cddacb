"""The fleet-wide lock with real processes, real files and real ``flock`` (D4, D5).

Mutual exclusion is checked across separate Python processes; a held lock past ``wait_s`` is a
LockTimeout that names the holder; a lock that cannot be taken at all proceeds, loudly.
Tests run as root here, so permissions cannot make a path unwritable: failures come from a path
under a regular file (ENOTDIR) and from /proc, which refuse root too.
"""

from __future__ import annotations

import io
import itertools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fleet.lock import (
    FleetLock,
    LockTimeout,
    RemoteFleetLock,
    parse_lock_line,
    remote_lock_command,
)
from fleet.transport import LocalTransport, SSHTransport

ROOT = Path(__file__).resolve().parents[2]
CHILD_ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

CONTENDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fleet.lock import FleetLock
    lock_path, log, counter, rounds = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    for _ in range(rounds):
        with FleetLock(lock_path, wait_s=20) as lock:
            assert lock.report.acquired, lock.report
            enter = time.monotonic_ns()
            n = int(counter.read_text())          # read-modify-write: lost updates show a race
            time.sleep(0.0005)
            counter.write_text(str(n + 1))
            leave = time.monotonic_ns()
            with open(log, "a") as fh:
                fh.write(f"{enter} {leave}\\n")
    """
)

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fleet.lock import FleetLock
    with FleetLock(Path(sys.argv[1])) as lock:
        assert lock.report.acquired
        print("holding", flush=True)
        time.sleep(30)
    """
)


def start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=CHILD_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def holder(tmp_path: Path):
    """A separate process holding the fleet lock until killed."""
    path = tmp_path / "locks" / "fleet.lock"
    proc = start(HOLDER, str(path))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding", proc.stderr and proc.stderr.read()
        yield path, proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.timeout(60)
def test_two_processes_never_overlap_inside_the_lock(tmp_path: Path) -> None:
    lock_path, log, counter = tmp_path / "fleet.lock", tmp_path / "log", tmp_path / "counter"
    counter.write_text("0")
    rounds = 50
    procs = [start(CONTENDER, str(lock_path), str(log), str(counter), str(rounds)) for _ in "ab"]
    for proc in procs:
        _, err = proc.communicate(timeout=45)
        assert proc.returncode == 0, err
    spans = sorted(tuple(map(int, line.split())) for line in log.read_text().splitlines())
    assert len(spans) == 2 * rounds
    assert int(counter.read_text()) == 2 * rounds  # no lost update
    for (_, prev_leave), (next_enter, _) in itertools.pairwise(spans):
        assert prev_leave <= next_enter  # intervals never overlap


def test_a_lock_held_past_wait_s_is_a_timeout_naming_the_holder(holder) -> None:
    path, proc = holder
    err = io.StringIO()
    started = time.monotonic()
    with pytest.raises(LockTimeout) as caught, FleetLock(path, wait_s=0.2, stderr=err):
        pytest.fail("entered a lock another process holds")
    assert 0.2 <= time.monotonic() - started < 5
    assert caught.value.holder.split()[:2] == [str(proc.pid), socket.gethostname()]
    assert str(proc.pid) in str(caught.value) and str(path) in str(caught.value)
    assert err.getvalue() == ""  # a held lock is evidence, not an outage: no fail-open warning


def test_the_lock_is_released_when_its_holder_dies(holder) -> None:
    path, proc = holder
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with FleetLock(path, wait_s=5) as lock:
        assert lock.report.acquired


def test_a_waiter_gets_the_lock_soon_after_release(tmp_path: Path) -> None:
    path = tmp_path / "fleet.lock"
    first = FleetLock(path)
    first.__enter__()
    holder = start(
        "import sys, time\nfrom pathlib import Path\nfrom fleet.lock import FleetLock\n"
        "with FleetLock(Path(sys.argv[1]), wait_s=10) as l: print(l.report.acquired, flush=True)",
        str(path),
    )
    time.sleep(0.3)  # the child is polling now
    first.__exit__(None, None, None)
    out, err = holder.communicate(timeout=20)
    assert out.strip() == "True", err


def test_report_records_wait_hold_and_the_holder_note_while_held(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "fleet.lock"  # parents are created
    with FleetLock(path, wait_s=1) as lock:
        assert lock.report.acquired and lock.report.warning is None
        pid, host, _at = path.read_text().split()
        assert (int(pid), host) == (os.getpid(), socket.gethostname())
        time.sleep(0.05)
    assert lock.report.held_s is not None and lock.report.held_s >= 0.05
    assert lock.report.waited_s < 1
    assert path.read_text() == ""  # a released lock names nobody


def test_two_lock_objects_in_one_process_exclude_each_other(tmp_path: Path) -> None:
    path = tmp_path / "fleet.lock"
    with FleetLock(path), pytest.raises(LockTimeout), FleetLock(path, wait_s=0.05):
        pytest.fail("flock locks are per open file: a second handle must wait")


@pytest.mark.parametrize(
    ("where", "errno_name"),
    [
        (lambda tmp: tmp / "a-regular-file" / "fleet.lock", "ENOTDIR"),
        (lambda tmp: Path("/proc/fleet-no-such-dir/fleet.lock"), "ENOENT"),  # refuses root too
    ],
    ids=["under-a-file", "proc"],
)
def test_an_unopenable_lock_path_proceeds_with_one_warning(
    tmp_path: Path, where, errno_name: str
) -> None:
    (tmp_path / "a-regular-file").write_text("x")
    path = where(tmp_path)
    err = io.StringIO()
    ran = False
    with FleetLock(path, wait_s=1, stderr=err) as lock:
        ran = True  # D5: the body runs without the lock
    assert ran
    assert lock.report.acquired is False and lock.report.held_s is None
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0] == lock.report.warning
    assert str(path) in lines[0] and "WITHOUT the fleet lock" in lines[0]
    assert errno_name in lines[0]


# --- RemoteFleetLock: flock on a lock host; this machine stands in via LocalTransport ---------


def test_remote_lock_command_and_its_tokens() -> None:
    cmd = remote_lock_command("~/locks/fleet lock", 1.5, "42 box 2026-01-01T00:00:00+00:00")
    assert "flock -w 1.500" in cmd and '"$HOME"/' in cmd
    assert parse_lock_line("fleet-lock:held") == ("held", "")
    assert parse_lock_line("fleet-lock:timeout 42 box t") == ("timeout", "42 box t")
    assert parse_lock_line("fleet-lock:timeout") == ("timeout", "")
    assert parse_lock_line("you said fleet-lock:held") is None
    assert parse_lock_line("fleet-lock:heldx") is None


def test_remote_lock_excludes_a_second_holder_and_names_the_first(tmp_path: Path) -> None:
    path = str(tmp_path / "remote" / "fleet.lock")
    host = LocalTransport("lock-host")
    with RemoteFleetLock(host, path, wait_s=5) as first:
        assert first.report.acquired
        pid, hostname, _ = Path(path).read_text().split()
        assert (int(pid), hostname) == (os.getpid(), socket.gethostname())
        with pytest.raises(LockTimeout) as caught, RemoteFleetLock(host, path, wait_s=0.2):
            pytest.fail("two holders of the remote lock")
        assert caught.value.holder.split()[0] == str(os.getpid())
    assert first.report.held_s is not None
    with RemoteFleetLock(host, path, wait_s=0.5) as again:  # closing released it
        assert again.report.acquired


def test_remote_and_local_locks_on_one_path_exclude_each_other(tmp_path: Path) -> None:
    """flock(1) and portalocker both take flock(2) locks: the two carriers agree on one file."""
    path = tmp_path / "fleet.lock"
    remote = RemoteFleetLock(LocalTransport("lock-host"), str(path), wait_s=0.2)
    with FleetLock(path), pytest.raises(LockTimeout), remote:
        pytest.fail("the remote lock ignored the local one")


@pytest.mark.parametrize(
    ("host", "path", "says"),
    [
        (LocalTransport("lock-host"), "{tmp}/a-regular-file/fleet.lock", "Not a directory"),
        (LocalTransport("lock-host", env={"PATH": "/nonexistent"}), "{tmp}/f.lock", "exit 127"),
    ],
    ids=["unwritable-path", "no-flock"],
)
def test_remote_lock_that_cannot_be_taken_proceeds_with_a_warning(
    tmp_path: Path, host: LocalTransport, path: str, says: str
) -> None:
    (tmp_path / "a-regular-file").write_text("x")
    err = io.StringIO()
    with RemoteFleetLock(host, path.format(tmp=tmp_path), wait_s=1, stderr=err) as lock:
        pass
    assert not lock.report.acquired
    assert err.getvalue().count("\n") == 1 and says in err.getvalue()
    assert "WITHOUT the fleet lock" in err.getvalue()


def test_unreachable_lock_host_proceeds_with_a_warning() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nobody listens on it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = SSHTransport(
        "lock-host", host="127.0.0.1", port=port, user="root", key=None, known_hosts=None
    )
    err = io.StringIO()
    with RemoteFleetLock(host, "/tmp/fleet.lock", wait_s=1, stderr=err) as lock:
        pass
    assert not lock.report.acquired
    assert "cannot reach the lock host" in err.getvalue() and "WITHOUT" in err.getvalue()
