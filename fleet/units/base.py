"""The Supervisor Protocol: one named, supervised unit per issue on a worker (D3, D4).

A unit is named ``task-<issue>`` and nothing else (D4; ``fleet.core.model.unit_name``, the one place the
name is built): the supervisor's own name registry is the
lock that refuses a second run of the same issue on the same worker, in the kernel, with no window.
Two backends implement the Protocol: systemd ``--user`` (``systemd.py``) and, where a worker has no
systemd user manager, the portable supervisor (``portable.py`` + ``python -m fleet.units``).

Pre-flight check 10 needs the claim's outcome as distinct codes (D20): a launch, a collision with a
live unit, a collision with a unit that already finished but still holds its name, and a supervisor
failure that is *not* a collision. :class:`ClaimCode` carries exactly those four.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from fleet.core.model import SupervisorKind, Unit

_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# ActiveState words that mean "the unit still holds its name and its main process has not ended".
LIVE_STATES = frozenset({"active", "activating", "reloading"})
# ActiveState words that mean "the run ended but the name is not yet collected".
FINISHED_STATES = frozenset({"deactivating", "failed", "inactive"})


class ClaimCode(StrEnum):
    """The outcome of one atomic claim of ``task-<issue>`` (pre-flight check 10)."""

    LAUNCHED = "launched"
    HELD_LIVE = "held-live"  # the same worker already runs this issue: the D4 refusal
    HELD_FINISHED = "held-finished"  # a finished run still holds the name (not yet collected)
    SUPERVISOR_FAILED = (
        "supervisor-failed"  # the supervisor failed for a reason that is no collision
    )


@dataclass(frozen=True)
class Claim:
    """What a start reported. ``unit`` is the launched unit (with its start time) or the holder."""

    code: ClaimCode
    unit: Unit | None
    detail: str

    @property
    def launched(self) -> bool:
        return self.code is ClaimCode.LAUNCHED


@dataclass(frozen=True)
class UnitStart:
    """One claim of ``task-<issue>`` as a value, so several can travel in one round trip."""

    issue: int
    argv: tuple[str, ...]
    env: Mapping[str, str]
    max_run_s: int
    cwd: str | None = None


@dataclass(frozen=True)
class StopResult:
    """What a stop did: whether a unit held the name, and whether the name is free now."""

    was_live: bool
    stopped: bool
    detail: str


class SupervisorError(Exception):
    """The supervisor could not be asked or its answer could not be read: *could not check*,
    never "no units" (D20). A probe raises it rather than return an empty tuple."""


class UnitsParseError(ValueError):
    """A supervisor's output did not have the expected shape; the message says what was missing."""


@runtime_checkable
class Supervisor(Protocol):
    """Named units on one worker under one master. Every method is one transport round trip
    (``start_many`` one per master where the backend can batch), except ``stop``, which is one
    round trip that waits on the worker until the name is free."""

    kind: SupervisorKind  # SYSTEMD or PORTABLE: AUTO is resolved before a supervisor exists
    worker: str
    master: str

    def probe(self) -> tuple[Unit, ...]:
        """Every ``task-*`` unit this master has, live or lingering; raises SupervisorError."""
        ...

    def start(
        self,
        issue: int,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        max_run_s: int,
        cwd: str | None = None,
    ) -> Claim:
        """The atomic claim of ``task-<issue>`` and the launch, in one round trip (check 10)."""
        ...

    def start_many(self, starts: Sequence[UnitStart]) -> list[Claim | None]:
        """Several claims on this master, each answered for itself with its own code (check 10);
        ``None`` where the answer was lost after the claim may have reached the worker (the unit
        may be live: the dispatcher's 49, never a guess). Raises TransportError when the round
        trip failed: every claim of it is then unconfirmed."""
        ...

    def stop(self, issue: int, *, timeout_s: float = 20.0) -> StopResult:
        """SIGTERM the unit's whole process tree, SIGKILL after ``timeout_s``; returns once the
        name is free (or says it is not)."""
        ...


def check_start_args(argv: Sequence[str], env: Mapping[str, str], max_run_s: int) -> None:
    """Validate what both backends need before anything reaches a shell.

    PATH is mandatory: a supervised unit does not inherit the caller's environment, and every
    dispatch to one box once died at ``jq: command not found`` because it was not passed (D3).
    """
    if isinstance(argv, str) or len(argv) == 0:
        raise ValueError("argv must be a non-empty sequence of strings")
    if not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must contain only strings")
    if "PATH" not in env or not env["PATH"]:
        raise ValueError("env must carry PATH: the unit does not inherit the caller's (D3)")
    for key, value in env.items():
        if not _ENV_KEY_RE.match(key):
            raise ValueError(f"env key {key!r} is not a valid variable name")
        if "\0" in value:
            raise ValueError(f"env value of {key} contains a NUL byte")
    if isinstance(max_run_s, bool) or not isinstance(max_run_s, int) or max_run_s <= 0:
        raise ValueError(f"max_run_s must be a positive int (seconds), got {max_run_s!r}")


# Claims in flight at once on one worker for a backend that starts one unit per round trip (the
# portable supervisor): each mostly waits on the worker (its supervisor's handshake), and sshd
# refuses an eleventh session on one connection (MaxSessions 10) that a concurrent command's
# probes may share, so 4 leaves room.
STARTS_IN_FLIGHT = 4


def start_each(sup: Supervisor, starts: Sequence[UnitStart]) -> list[Claim | None]:
    """``start_many`` for a backend whose claims cannot share a round trip: each start on its
    own, ``STARTS_IN_FLIGHT`` at a time, in order; a start whose round trip failed is ``None``
    (it may have reached the worker)."""
    from concurrent.futures import ThreadPoolExecutor

    from fleet.transport.base import TransportError

    def one(s: UnitStart) -> Claim | None:
        try:
            return sup.start(s.issue, s.argv, env=s.env, max_run_s=s.max_run_s, cwd=s.cwd)
        except TransportError:
            return None

    if len(starts) <= 1:
        return [one(s) for s in starts]
    with ThreadPoolExecutor(max_workers=min(len(starts), STARTS_IN_FLIGHT)) as pool:
        return list(pool.map(one, starts))
