"""The runner's writes to its worker's capacity file: darken, heal, stamp a canary (D8).

D8's self-healing is "the worker's **next** clean run deletes the file". Next means a run that
STARTED after the file was written: runs overlap on one worker, and a run that began before the
limit hit proves nothing about the account now — it may have finished its last turn a minute before
another run found the account exhausted. So the file's own ``written_at`` (this worker's clock) is
compared with the run's start (the same clock, step 2). A ``revoked`` file is never deleted by a
run: only a human who renewed the credential knows it is back.

Every read-decide-write here happens under one ``flock`` beside the file, so a run that decides to
heal cannot delete a file another run rewrote a moment later. The dispatcher's probe reads the file
without the lock; every write is an atomic rename, so it sees the old file or the new one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from fleet.core.canary import canary_due
from fleet.core.model import Capacity, CapacitySource, iso, utc
from fleet.runner.capacity import clear_capacity, read_capacity, write_capacity
from fleet.runner.flock import exclusive


class Heal(StrEnum):
    """What a clean run did with the capacity file, one name each (D20)."""

    NO_FILE = "no-file"
    DELETED = "deleted"  # the run started after the file was written
    KEPT_OLDER_RUN = "kept-older-run"  # the run started before it: it proves nothing now
    KEPT_REVOKED = "kept-revoked"  # only a human clears a revocation
    KEPT_UNDATED = "kept-undated"  # no written_at to compare with, or unreadable: a human decides


def capacity_lock(path: Path) -> AbstractContextManager[None]:
    """The lock every runner write of the capacity file takes (``capacity.json.lock``)."""
    return exclusive(Path(path).with_name(Path(path).name + ".lock"))


def heal_decision(cap: Capacity | None, run_started: datetime) -> Heal:
    """Pure: may a clean run that started at ``run_started`` delete ``cap``?"""
    if cap is None:
        return Heal.NO_FILE
    if cap.source is CapacitySource.REVOKED:
        return Heal.KEPT_REVOKED
    if cap.written_at is None:
        return Heal.KEPT_UNDATED
    if utc(run_started) <= utc(cap.written_at):
        return Heal.KEPT_OLDER_RUN
    return Heal.DELETED


def darken(path: Path, cap: Capacity) -> None:
    """A limit: write (or rewrite) the file. A revocation is never downgraded by a later run's rate
    limit — telling someone to wait out a revocation is worse than saying nothing (D8)."""
    with capacity_lock(path):
        old, _warning = read_capacity(path)
        if (
            old is not None
            and old.source is CapacitySource.REVOKED
            and cap.source is not CapacitySource.REVOKED
        ):
            return
        write_capacity(path, cap)


def heal(path: Path, run_started: datetime) -> tuple[Heal, str | None]:
    """A clean run: delete the file when :func:`heal_decision` allows; (what happened, a warning)."""
    with capacity_lock(path):
        cap, warning = read_capacity(path)
        if cap is None and warning is None:
            return Heal.NO_FILE, None
        what = Heal.KEPT_UNDATED if cap is None else heal_decision(cap, run_started)
        if what is Heal.DELETED:
            clear_capacity(path)
        return what, warning


def stamp_canary(path: Path, now: datetime) -> Capacity | None:
    """Step 2 on a dark worker: when this run is the canary (an unknown-reset rate limit whose
    canary is due), record ``canary_at`` so a canary that fails for another reason is followed by
    the next one only a full period later. Returns the stamped value, or None."""
    with capacity_lock(path):
        cap, _warning = read_capacity(path)
        if cap is None:
            return None
        due = canary_due(cap)
        if due is None or due > utc(now):
            return None
        stamped = replace(cap, canary_at=utc(now))
        write_capacity(path, stamped)
        return stamped


def describe_heal(what: Heal, path: Path, run_started: datetime) -> str | None:
    """The runner's log line for a clean run's decision; None when there was no file."""
    return {
        Heal.NO_FILE: None,
        Heal.DELETED: f"clean run: capacity file {path} deleted",
        Heal.KEPT_OLDER_RUN: (
            f"clean run, but it started at {iso(run_started)}, before the capacity file {path} "
            "was written: the file stays (only a run started after it may heal the worker)"
        ),
        Heal.KEPT_REVOKED: (
            f"clean run: capacity file {path} says revoked and stays; renew the credential, then "
            "delete it by hand"
        ),
        Heal.KEPT_UNDATED: (
            f"clean run: capacity file {path} has no readable written_at; it stays for a human"
        ),
    }[what]
