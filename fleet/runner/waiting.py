"""Wait for the agent to exit, asleep in the kernel: a run is mostly this wait.

``Popen.wait(timeout)`` polls: it wakes up to 20 times a second to ask whether the child ended,
about 1.6 ms of worker CPU per second of a run here (docs/performance.md, "The runner's CPU") —
more than a whole no-op run's close-out over a ten-minute agent run. A pidfd (Linux 5.3) becomes
readable when the process exits, so one ``poll`` sleeps until the exit or the timeout. Where no
pidfd can be opened, the polling wait is the fallback.

A signal still ends the wait: the runner's handler raises out of ``poll`` as it did out of the
polling loop's sleep (D12).
"""

from __future__ import annotations

import math
import os
import select
import subprocess

_POLL_MAX_MS = 2**31 - 1


def exit_within(proc: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """``proc``'s exit code once it exits within ``timeout_s`` seconds (reaped), else None."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        # Not reaped yet, so the pid is still this child's (a zombie at worst), never a reused one.
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (not Linux, an old kernel, a seccomp filter)
        try:
            return proc.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        # Rounded up, so a wait never ends before its timeout; capped at poll's C int.
        if not poller.poll(min(max(0, math.ceil(timeout_s * 1000)), _POLL_MAX_MS)):
            return None
    finally:
        os.close(fd)
    return proc.wait()
