"""The engine (seed 000): a deterministic drain over a six-method ``Loop`` and a separate ``Claim``.

Anything the loop must not forget lives here, in code: claim before dispatch (the only path to a
dispatch), land every outcome — failures included — and release the claim in the same motion,
continue past a failed item, and classify failures three ways (retry, refuse, cannot-classify →
a human). Every step is journalled to the trace as it happens: the trace is the run.

The pool bounds dispatch *calls* in flight, never runs (D13): a launched unit is not in the pool.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, TypeVar

from fleet.trace import Trace

Item = TypeVar("Item")


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
    dispatched: int = 0
    ok: int = 0
    failed: int = 0
    to_human: int = 0
    skipped_claimed: int = 0
    rounds: int = 0


def drain(
    loop: Loop[Item],
    claims: Claim,
    trace: Trace,
    *,
    pool: int = 4,
    key: Callable[[Item], str] = str,
    max_rounds: int = 1000,
) -> DrainReport:
    """Drain ``loop``: claim → dispatch → land → release, refilling a pool of ``pool`` calls."""
    report = DrainReport()
    ns = loop.name()
    with ThreadPoolExecutor(max_workers=pool) as ex:
        while report.rounds < max_rounds:
            report.rounds += 1
            items = list(loop.select_queue())
            inflight: dict[Future[Result], Item] = {}
            queue = list(items)
            while queue or inflight:
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
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    item = inflight.pop(fut)
                    k = key(item)
                    result = fut.result()
                    try:
                        loop.land(item, result)
                    finally:
                        claims.release(ns, k)
                    report.ok += result.ok
                    report.failed += not result.ok
                    failure = str(result.failure) if result.failure else None
                    trace.event(
                        "LAND", loop=ns, item=k, ok=result.ok, failure=failure, detail=result.detail
                    )
                    trace.event("RELEASE", loop=ns, item=k)
            if not loop.on_idle():
                trace.event("IDLE", loop=ns, then="stop")
                break
            trace.event("IDLE", loop=ns, then="poll")
    return report


def _safe(loop: Loop[Item], item: Item) -> Result:
    """A failed dispatch does not abort the drain: it is landed as failed (seed 000)."""
    try:
        return loop.dispatch(item)
    except Exception as exc:  # the engine classifies; it never crashes on an item
        return Result(False, f"{type(exc).__name__}: {exc}", Failure.UNCLASSIFIED)


__all__ = [
    "Claim",
    "DrainReport",
    "Failure",
    "FileClaims",
    "Loop",
    "Result",
    "Tier",
    "drain",
]
