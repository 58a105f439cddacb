"""The engine (seed 000): a deterministic drain over a six-method ``Loop`` and a separate ``Claim``.

Anything the loop must not forget lives here, in code: claim before dispatch (the only path to a
dispatch), land every outcome — failures included — and release the claim in the same motion,
continue past a failed item, and act on the three failure classes (seed 000):

- **retry**: the item is dispatched again after ``RETRY_BACKOFFS_S`` (claimed again, so another
  dispatcher may take it meanwhile), at most once per rung; past the ladder it lands as failed and
  the next drain (the timer) is the outer retry;
- **refuse**: landed, never retried, nobody is told — a guard said no on positive evidence;
- **cannot-classify**: landed, never retried, and handed to ``escalate`` — the role's way to tell a
  human (the announcer files one report per item, idempotent by title). Never guessed.

Every step is journalled to the trace as it happens: the trace is the run.

The pool bounds dispatch *calls* in flight, never runs (D13): a launched unit is not in the pool.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

from fleet.trace import Trace

Item = TypeVar("Item")

# The retry class's ladder: seconds before each re-dispatch of an item within one drain. The
# sweeper's retry-class refusals clear within seconds: a finished unit frees its name once its
# leftovers are killed — at most the portable supervisor's 20 s kill grace plus 5 s for SIGKILL
# (systemd: 5 s), so 10 + 30 = 40 s outlasts the worst unload; the fleet lock is held ~2.7 s per
# sweep batch (docs/performance.md), and the dispatcher already waited lock.wait_s for it; an ssh
# connection dropped by sshd's MaxStartups or a reset answers on the next connect. The whole ladder
# (40 s plus two dispatches) stays inside the sweeper unit's TimeoutStartSec=240 beside the tick's
# own probe and batch. Past it the item waits for the next tick: the timer is the outer retry.
RETRY_BACKOFFS_S: tuple[float, ...] = (10.0, 30.0)


class Tier(StrEnum):
    DISPATCH = "dispatch"
    HUMAN = "human"  # a hold routes to a human: the engine never dispatches it


class Failure(StrEnum):
    """Three outcomes, not two: a two-state taxonomy must guess on an unrecognised failure."""

    RETRY = "retry"
    REFUSE = "refuse"
    UNCLASSIFIED = "cannot-classify"  # routed to a human, never guessed


@dataclass(frozen=True)
class Result:
    ok: bool
    detail: str = ""
    failure: Failure | None = None
    data: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Escalation:
    """A cannot-classify failure, handed to a human: which loop, which item, what it said."""

    loop: str
    item: str
    detail: str
    data: dict[str, object] = field(default_factory=dict)


Escalate = Callable[[Sequence[Escalation]], None]


class Loop(Protocol[Item]):
    """Six methods; a seventh is a design review, never a patch (seed 000)."""

    def name(self) -> str: ...

    def select_queue(self) -> Sequence[Item]: ...

    def tier_policy(self, item: Item) -> Tier: ...

    def dispatch(self, item: Item) -> Result: ...

    def land(self, item: Item, result: Result) -> None: ...

    def on_idle(self) -> bool:
        """What "empty" means: True = poll again, False = stop."""
        ...


class Claim(Protocol):
    """Claiming is its own small interface, because the dedupe rests on it."""

    def claim(self, namespace: str, key: str) -> bool: ...

    def release(self, namespace: str, key: str) -> None: ...


class FileClaims:
    """Exclusive-create claim files: the smallest cross-process claim store (seed 000). A claim
    records its pid; one whose process is gone is reclaimed (the reference engine had no reclaim,
    and production needs it)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, namespace: str, key: str) -> Path:
        return self.root / namespace / f"{key}.claim"

    def claim(self, namespace: str, key: str) -> bool:
        path = self._path(namespace, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale(path):
                    path.unlink(missing_ok=True)
                    continue
                return False
            with os.fdopen(fd, "w") as fh:
                fh.write(f"{os.getpid()}\n")
            return True
        return False

    @staticmethod
    def _stale(path: Path) -> bool:
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return False  # unreadable: not provably stale, keep it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def release(self, namespace: str, key: str) -> None:
        self._path(namespace, key).unlink(missing_ok=True)


@dataclass
class DrainReport:
    dispatched: int = 0  # dispatch calls, retries included
    ok: int = 0
    failed: int = 0  # landed failures, each attempt of a retried item included
    to_human: int = 0  # routed to a human by tier policy, never dispatched
    skipped_claimed: int = 0
    rounds: int = 0
    retried: int = 0  # re-dispatches of retry-class failures
    refused: int = 0
    unclassified: list[Escalation] = field(default_factory=list)


def drain(
    loop: Loop[Item],
    claims: Claim,
    trace: Trace,
    *,
    pool: int = 4,
    key: Callable[[Item], str] = str,
    max_rounds: int = 1000,
    backoffs: Sequence[float] | None = None,
    escalate: Escalate | None = None,
) -> DrainReport:
    """Drain ``loop``: claim → dispatch → land → release, refilling a pool of ``pool`` calls.

    ``backoffs`` is the retry ladder (``RETRY_BACKOFFS_S`` when None); ``escalate`` receives each
    round's cannot-classify failures (when None they are only journalled and reported here)."""
    report = DrainReport()
    ladder = tuple(RETRY_BACKOFFS_S if backoffs is None else backoffs)
    with ThreadPoolExecutor(max_workers=pool) as ex:
        while report.rounds < max_rounds:
            report.rounds += 1
            escalations = _round(loop, claims, trace, ex, pool, key, ladder, report)
            if escalations:
                _escalate(loop.name(), escalations, escalate, trace)
            ns = loop.name()
            if not loop.on_idle():
                trace.event("IDLE", loop=ns, then="stop")
                break
            trace.event("IDLE", loop=ns, then="poll")
    return report


def _round(
    loop: Loop[Item],
    claims: Claim,
    trace: Trace,
    ex: ThreadPoolExecutor,
    pool: int,
    key: Callable[[Item], str],
    ladder: tuple[float, ...],
    report: DrainReport,
) -> list[Escalation]:
    """One pass over the queue, retries included; returns the round's cannot-classify failures."""
    ns = loop.name()
    queue = list(loop.select_queue())
    inflight: dict[Future[Result], Item] = {}
    parked: list[tuple[float, Item]] = []  # (monotonic due time, item): retries not yet due
    tries: dict[str, int] = {}
    escalations: list[Escalation] = []
    while queue or inflight or parked:
        now = time.monotonic()
        queue += [item for due, item in parked if due <= now]
        parked = [(due, item) for due, item in parked if due > now]
        while queue and len(inflight) < pool:
            item = queue.pop(0)
            k = key(item)
            if loop.tier_policy(item) is Tier.HUMAN:
                report.to_human += 1
                trace.event("ROUTE", loop=ns, item=k, to="human")
                continue
            if not claims.claim(ns, k):
                report.skipped_claimed += 1
                trace.event("SKIP", loop=ns, item=k, why="claimed elsewhere")
                continue
            trace.event("CLAIM", loop=ns, item=k)
            trace.event("DISPATCH", loop=ns, item=k)
            report.dispatched += 1
            inflight[ex.submit(_safe, loop, item)] = item
        next_due = min((due for due, _ in parked), default=None)
        if not inflight:
            if next_due is None:
                break
            time.sleep(max(0.0, next_due - time.monotonic()))
            continue
        timeout = None if next_due is None else max(0.0, next_due - time.monotonic())
        done, _ = wait(inflight, timeout=timeout, return_when=FIRST_COMPLETED)
        for fut in done:
            item = inflight.pop(fut)
            k = key(item)
            result = fut.result()
            _land(loop, claims, trace, item, k, result, report)
            if result.failure is Failure.RETRY and tries.get(k, 0) < len(ladder):
                delay = ladder[tries.get(k, 0)]
                tries[k] = tries.get(k, 0) + 1
                report.retried += 1
                parked.append((time.monotonic() + delay, item))
                trace.event("RETRY", loop=ns, item=k, after_s=delay, rung=tries[k], of=len(ladder))
            elif result.failure is Failure.REFUSE:
                report.refused += 1
            elif result.failure is Failure.UNCLASSIFIED:
                esc = Escalation(ns, k, result.detail, dict(result.data))
                escalations.append(esc)
                report.unclassified.append(esc)
                trace.event("ROUTE", loop=ns, item=k, to="human", why=str(Failure.UNCLASSIFIED))
    return escalations


def _land(
    loop: Loop[Item],
    claims: Claim,
    trace: Trace,
    item: Item,
    k: str,
    result: Result,
    report: DrainReport,
) -> None:
    """Land one outcome and release its claim in the same motion (seed 000)."""
    ns = loop.name()
    try:
        loop.land(item, result)
    finally:
        claims.release(ns, k)
    report.ok += result.ok
    report.failed += not result.ok
    failure = str(result.failure) if result.failure else None
    trace.event("LAND", loop=ns, item=k, ok=result.ok, failure=failure, detail=result.detail)
    trace.event("RELEASE", loop=ns, item=k)


def _escalate(
    ns: str, escalations: list[Escalation], escalate: Escalate | None, trace: Trace
) -> None:
    """Hand the round's cannot-classify failures to the role's human channel. Its own failure is
    journalled and does not stop the drain (the role says it on stderr, D5)."""
    if escalate is None:
        trace.event("ESCALATE", loop=ns, items=[e.item for e in escalations], to=None)
        return
    try:
        escalate(escalations)
    except Exception as exc:  # the channel's outage must not become the drain's
        trace.event("ESCALATE", loop=ns, items=[e.item for e in escalations], error=repr(exc))
        return
    trace.event("ESCALATE", loop=ns, items=[e.item for e in escalations], to="human")


def _safe(loop: Loop[Item], item: Item) -> Result:
    """A failed dispatch does not abort the drain: it is landed as failed (seed 000)."""
    try:
        return loop.dispatch(item)
    except Exception as exc:  # the engine classifies; it never crashes on an item
        return Result(False, f"{type(exc).__name__}: {exc}", Failure.UNCLASSIFIED)


__all__ = [
    "RETRY_BACKOFFS_S",
    "Claim",
    "DrainReport",
    "Escalate",
    "Escalation",
    "Failure",
    "FileClaims",
    "Loop",
    "Result",
    "Tier",
    "drain",
]
