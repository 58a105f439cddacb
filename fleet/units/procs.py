"""Worker-side OS primitives of the portable supervisor: the name lock and the process tree.

The name lock is a POSIX record lock (``fcntl`` F_SETLK) on ``DIR/task-N.lock``. That kind was
chosen over ``flock`` on purpose: a record lock belongs to the *process* — it is not inherited by
a forked child and the kernel drops it the instant the holder dies, so a crashed supervisor frees
the name at once and nothing goes stale (D4) — and F_GETLK tests for a holder *without acquiring*,
returning the holder's pid, so a probe can never make a concurrent start see a false collision.

The tree helpers stand in for systemd's control-group kill (D3, property 3): the supervisor is a
child subreaper, so a ``setsid``-detached grandchild whose parent died is re-parented to it and
stays findable by walking ``/proc`` ppid chains.

Linux only (``/proc``, ``prctl``); the ``struct flock`` layout below is the 64-bit one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import signal
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any

# struct flock on 64-bit Linux: short l_type, short l_whence, (pad) off_t l_start, off_t l_len,
# pid_t l_pid, (pad) — 32 bytes. F_GETLK writes all of it back.
_FLOCK_FMT = "hhqqi"
_FLOCK_SIZE = 32
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36


def _flock_bytes(l_type: int) -> bytes:
    raw = struct.pack(_FLOCK_FMT, l_type, os.SEEK_SET, 0, 0, 0)
    return raw + b"\0" * (_FLOCK_SIZE - len(raw))


def try_lock(fd: int) -> bool:
    """Take the exclusive record lock on the whole file, without waiting. False = someone holds it."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETLK, _flock_bytes(fcntl.F_WRLCK))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        raise
    return True


def lock_holder(path: str) -> int | None:
    """The pid holding the record lock on ``path``, or None; never acquires (F_GETLK).

    A missing file has no holder. Raises OSError when the file exists but cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        out = fcntl.fcntl(fd, fcntl.F_GETLK, _flock_bytes(fcntl.F_WRLCK))
    finally:
        os.close(fd)
    l_type, _whence, _start, _len, l_pid = struct.unpack(
        _FLOCK_FMT, out[: struct.calcsize(_FLOCK_FMT)]
    )
    if l_type == fcntl.F_UNLCK:
        return None
    return l_pid if l_pid > 0 else -1  # -1: held, by a process outside our pid namespace


def _libc() -> Any:
    """libc through ctypes, imported here rather than at the top: the dispatcher reads unit
    records through this module (fleet.units.__main__'s probe) and never calls prctl."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> None:
    """Make orphaned descendants re-parent to this process instead of init (D3's whole tree)."""
    import ctypes

    if _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def die_with_parent(sig: int, parent: int) -> Callable[[], None]:
    """For Popen's ``preexec_fn``, built in the supervisor: the returned function, run in the
    freshly forked child, makes it receive ``sig`` when the supervisor dies. A crashed supervisor
    frees the name at once (D4); without this its main process would run on unsupervised while a
    new claim of the same name launches a second run of the issue. If the parent is already
    gone, the child exits at once instead of exec'ing an orphan. libc is loaded here, before the
    fork: the child only calls it (no import between fork and exec)."""
    libc = _libc()

    def in_child() -> None:
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(128 + sig)

    return in_child


def _stat_fields(pid: int) -> tuple[int, str, int, int] | None:
    """(ppid, state letter, starttime in clock ticks, process group) from /proc/<pid>/stat, or
    None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()  # comm may hold spaces and parens
    if len(rest) < 20:
        return None
    return int(rest[1]), rest[0], int(rest[19]), int(rest[2])


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state letter) of every process visible in /proc."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None:
                table[int(entry)] = (fields[0], fields[1])
    return table


def descendants(root: int, *, include_zombies: bool = False) -> set[int]:
    """Every process whose ppid chain reaches ``root`` (not ``root`` itself)."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    if include_zombies:
        return found
    return {pid for pid in found if table[pid][1] not in ("Z", "X")}


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[1] not in ("Z", "X")


def group_runs(pgid: int) -> bool:
    """Does any process of group ``pgid`` still run (a zombie awaiting its reaper does not)?"""
    for entry in os.listdir("/proc"):
        fields = _stat_fields(int(entry)) if entry.isdigit() else None
        if fields is not None and fields[3] == pgid and fields[1] not in ("Z", "X"):
            return True
    return False


def start_us_of(pid: int) -> int:
    """A process's start time in µs since boot (from /proc; 0 if gone). Used only when a name is
    held but its state file is not written yet: an approximation of the monotonic start."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0
    return fields[2] * 1_000_000 // os.sysconf("SC_CLK_TCK")


def signal_all(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each pid; a pid that is already gone is not an error."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def reap_children() -> dict[int, int]:
    """Collect every exited child of this process without blocking: pid -> wait status."""
    reaped: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = status


# How often the tree kill re-reads /proc while it waits: bounds the delay between the last
# process exiting and the name being freed (a /proc walk costs ~1 ms per 100 processes).
KILL_POLL_S = 0.05
# After SIGKILL a process can still sit in uninterruptible sleep (D state) for a moment; this
# bounds how long the supervisor waits for that before it collects the unit anyway.
SIGKILL_WAIT_S = 5.0


def kill_tree(root: int, grace_s: float, on_reap: dict[int, int] | None = None) -> set[int]:
    """SIGTERM every descendant of ``root`` (including late forks), SIGKILL what is left after
    ``grace_s``; reap what we parent. Returns the pids that survived even SIGKILL (normally empty).

    ``root`` must be this process (the subreaper) for re-parented orphans to stay in reach.
    ``on_reap`` receives the wait status of each reaped child so the caller keeps its main exit.
    """
    reaped = on_reap if on_reap is not None else {}
    termed: set[int] = set()
    deadline = time.monotonic() + grace_s
    while True:
        reaped.update(reap_children())
        pids = descendants(root)
        if not pids:
            return set()
        fresh = pids - termed
        signal_all(fresh, signal.SIGTERM)
        termed |= fresh
        if time.monotonic() >= deadline:
            break
        time.sleep(KILL_POLL_S)
    kill_deadline = time.monotonic() + SIGKILL_WAIT_S
    while True:
        reaped.update(reap_children())
        pids = descendants(root)
        if not pids or time.monotonic() >= kill_deadline:
            return pids
        signal_all(pids, signal.SIGKILL)
        time.sleep(KILL_POLL_S)
