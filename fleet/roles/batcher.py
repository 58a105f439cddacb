"""Concurrent dispatch calls of one process joined into ``dispatch_batch`` calls (leader/follower).

The engine calls the sweeper's ``dispatch(item)`` from a pool of threads, one item each, and keeps
its claim, landing and trace per item. Left alone, each call would pay the whole pre-flight — a
probe of every worker for checks 8 and 4, a clone sync, and a probe of every worker under the
fleet lock — for ONE launch; measured on the harness that is ~0.5 s of worker CPU per launch, and
the fleet lock serialises it (docs/performance.md). Here the first caller to arrive leads: it lingers
``LINGER_S`` for the calls the engine is handing out right behind it, then runs one
``dispatch_batch`` for every call waiting; calls that arrive meanwhile wait and form the next
batch. Without the linger the engine, refilling its pool one landed item at a time, made every
other batch a batch of one or two (measured: batches of 1 and of 28 in turn).

Nothing is decided here: every guard runs in ``fleet.dispatch`` (D15), once per batch or once per
request, as ``dispatch_batch`` documents.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from fleet.board.base import BoardPage
from fleet.context import FleetContext
from fleet.dispatch import DispatchResult, Request, dispatch_batch

# How long a new leader waits for more calls before it runs its batch. Landing a finished batch
# and handing out the next items takes the engine ~1 ms per item; a batch takes a second or more
# (probes, syncs, claims), so 50 ms costs little and lets the next batch fill.
LINGER_S = 0.05


@dataclass
class _Call:
    request: Request
    page: BoardPage | None
    result: DispatchResult | None = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


class Batcher:
    def __init__(self, ctx: FleetContext, *, linger_s: float = LINGER_S) -> None:
        self.ctx = ctx
        self.linger_s = linger_s
        self._cv = threading.Condition()
        self._pending: list[_Call] = []
        self._running = False
        self.batches: list[int] = []  # the size of every batch run, for the trace and the bench

    def dispatch(
        self, issue: int, *, worker: str | None = None, page: BoardPage | None = None
    ) -> DispatchResult:
        """``dispatch(ctx, issue, worker=worker, page=page)``, batched with concurrent callers."""
        call = _Call(Request(issue, worker), page)
        with self._cv:
            self._pending.append(call)
            while self._running and not call.done:
                self._cv.wait()
            if not call.done:  # nobody is running a batch: lead one with everything waiting
                self._running = True
                if self.linger_s > 0:
                    self._cv.wait(self.linger_s)  # lets the others queue behind this call
                batch, self._pending = self._pending, []
        if not call.done:
            self._lead(batch)
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _lead(self, batch: list[_Call]) -> None:
        try:
            results = dispatch_batch(self.ctx, [c.request for c in batch], page=batch[0].page)
        except BaseException as exc:  # every caller of the batch sees the failure as its own
            for c in batch:
                c.error = exc
        else:
            for c, r in zip(batch, results, strict=True):
                c.result = r
        finally:
            with self._cv:
                self.batches.append(len(batch))
                self._running = False
                self._cv.notify_all()
