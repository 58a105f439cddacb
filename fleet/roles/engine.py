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

A round hands the loop every item it claimed, up to ``pool``, in ONE ``dispatch`` call, and lands
each answer: the sweeper's dispatches share one probe and one hold of the fleet lock that way
(``fleet.dispatch.dispatch_batch``), and a loop whose items are independent writes runs them side by
side with :func:`each`. The pool bounds items handed out at once, never runs (D13): a launched unit
is not in the pool.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Generic, Protocol, TypeVar

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

    def dispatch(self, items: Sequence[Item]) -> Sequence[Result]:
        """Carry out the dispatches of one round, every item already claimed: one Result per
        item, in order (seed 000's ``Dispatch(Item)``, a round at a time)."""
        ...

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
    """Drain ``loop``: claim → dispatch → land → release, ``pool`` items at a time.

    ``backoffs`` is the retry ladder (``RETRY_BACKOFFS_S`` when None); ``escalate`` receives each
    round's cannot-classify failures (when None they are only journalled and reported here)."""
    report = DrainReport()
    ladder = tuple(RETRY_BACKOFFS_S if backoffs is None else backoffs)
    while report.rounds < max_rounds:
        report.rounds += 1
        escalations = _Round(loop, claims, trace, key, ladder, report).run(pool)
        if escalations:
            _escalate(loop.name(), escalations, escalate, trace)
        ns = loop.name()
        if not loop.on_idle():
            trace.event("IDLE", loop=ns, then="stop")
            break
        trace.event("IDLE", loop=ns, then="poll")
    return report


class _Round(Generic[Item]):
    """One pass over the queue, retries included."""

    def __init__(
        self,
        loop: Loop[Item],
        claims: Claim,
        trace: Trace,
        key: Callable[[Item], str],
        ladder: tuple[float, ...],
        report: DrainReport,
    ) -> None:
        self.loop, self.claims, self.trace, self.key = loop, claims, trace, key
        self.ladder, self.report = ladder, report
        self.ns = loop.name()
        self.parked: list[tuple[float, Item]] = []  # (monotonic due time, item): retries not due
        self.tries: dict[str, int] = {}
        self.escalations: list[Escalation] = []

    def run(self, pool: int) -> list[Escalation]:
        """Returns the round's cannot-classify failures."""
        queue = list(self.loop.select_queue())
        while queue or self.parked:
            now = time.monotonic()
            queue += [item for due, item in self.parked if due <= now]
            self.parked = [(due, item) for due, item in self.parked if due > now]
            batch: list[Item] = []
            while queue and len(batch) < pool:
                item = queue.pop(0)
                if self._claim(item):
                    batch.append(item)
            if batch:
                for item, result in zip(batch, _safe(self.loop, batch), strict=True):
                    self._landed(item, result)
            elif not queue and self.parked:
                time.sleep(max(0.0, min(due for due, _ in self.parked) - time.monotonic()))
        return self.escalations

    def _claim(self, item: Item) -> bool:
        k, ns = self.key(item), self.ns
        if self.loop.tier_policy(item) is Tier.HUMAN:
            self.report.to_human += 1
            self.trace.event("ROUTE", loop=ns, item=k, to="human")
            return False
        if not self.claims.claim(ns, k):
            self.report.skipped_claimed += 1
            self.trace.event("SKIP", loop=ns, item=k, why="claimed elsewhere")
            return False
        self.trace.event("CLAIM", loop=ns, item=k)
        self.trace.event("DISPATCH", loop=ns, item=k)
        self.report.dispatched += 1
        return True

    def _landed(self, item: Item, result: Result) -> None:
        k, ns, report = self.key(item), self.ns, self.report
        _land(self.loop, self.claims, self.trace, item, k, result, report)
        rung = self.tries.get(k, 0)
        if result.failure is Failure.RETRY and rung < len(self.ladder):
            delay = self.ladder[rung]
            self.tries[k] = rung + 1
            report.retried += 1
            self.parked.append((time.monotonic() + delay, item))
            self.trace.event(
                "RETRY", loop=ns, item=k, after_s=delay, rung=rung + 1, of=len(self.ladder)
            )
        elif result.failure is Failure.REFUSE:
            report.refused += 1
        elif result.failure is Failure.UNCLASSIFIED:
            esc = Escalation(ns, k, result.detail, dict(result.data))
            self.escalations.append(esc)
            report.unclassified.append(esc)
            self.trace.event("ROUTE", loop=ns, item=k, to="human", why=str(Failure.UNCLASSIFIED))


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


def _safe(loop: Loop[Item], items: Sequence[Item]) -> list[Result]:
    """A failed dispatch does not abort the drain: each of its items is landed as failed."""
    try:
        results = list(loop.dispatch(items))
    except Exception as exc:  # the engine classifies; it never crashes on an item
        return [Result(False, f"{type(exc).__name__}: {exc}", Failure.UNCLASSIFIED) for _ in items]
    if len(results) != len(items):  # a loop that lost an answer cannot say which one it lost
        why = f"dispatch answered {len(results)} results for {len(items)} items"
        return [Result(False, why, Failure.UNCLASSIFIED) for _ in items]
    return results


def each(items: Sequence[Item], one: Callable[[Item], Result]) -> list[Result]:
    """A loop's dispatch for independent items: ``one`` on each, side by side (one thread an item;
    the round is at most the drain's ``pool``), and an item whose call raised lands as failed."""

    def safe(item: Item) -> Result:
        try:
            return one(item)
        except Exception as exc:  # one item's crash is that item's failure, not the round's
            return Result(False, f"{type(exc).__name__}: {exc}", Failure.UNCLASSIFIED)

    if len(items) <= 1:
        return [safe(item) for item in items]
    with ThreadPoolExecutor(max_workers=len(items)) as pool:
        return list(pool.map(safe, items))


class IndependentItems(Generic[Item]):
    """Two of the six methods for a loop whose items are independent writes: every item is for
    dispatch (its queue holds no hold), and a round's items run side by side through :func:`each`.
    The loop writes ``_one``, the dispatch of one item."""

    def tier_policy(self, item: Item) -> Tier:
        return Tier.DISPATCH

    def dispatch(self, items: Sequence[Item]) -> list[Result]:
        return each(items, self._one)

    def _one(self, item: Item) -> Result:
        raise NotImplementedError


__all__ = [
    "RETRY_BACKOFFS_S",
    "Claim",
    "DrainReport",
    "Escalate",
    "Escalation",
    "Failure",
    "FileClaims",
    "IndependentItems",
    "Loop",
    "Result",
    "Tier",
    "drain",
    "each",
]
