"""One exclusive ``flock`` on a file beside the thing it guards, as a context manager.

For the worker-local locks that serialise writers of one file or one clone (the clone lock, the
capacity file's lock); the fleet-wide lock across probe and launch is :mod:`fleet.lock`. It lives
with the runner, its only user, apart from that package: importing ``fleet.lock`` loads portalocker
and the transports, which a run on a worker never uses (docs/performance.md, "The runner's CPU").
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock`` (created, with its directory, when missing)."""
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
