"""Drain's waiting half: observe the fleet, judge it with the pure close rule, and — for
``drain --wait`` — poll until it is idle, bounded in count and in time.

The observation is the production one (``observe.snapshot``: one board read, one fleet probe), so
"idle" here means exactly what the sweeper would see.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleet.context import FleetContext
from fleet.core.idle import IdleVerdict, idle
from fleet.observe import snapshot

# drain --wait polls at this period: a run's end is seen within one period, and each poll is one
# board read plus one probe per worker (cheap locally, ~a round trip per SSH worker).
POLL_S = 5.0


@dataclass(frozen=True)
class WaitResult:
    verdict: IdleVerdict
    polls: int
    waited_s: float


def observe_idle(ctx: FleetContext) -> IdleVerdict:
    return idle(snapshot(ctx))


def wait_idle(
    observe: Callable[[], IdleVerdict],
    wait_s: float,
    *,
    poll_s: float = POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> WaitResult:
    """Observe until idle or until ``wait_s`` has passed; at most ``ceil(wait_s / poll_s) + 1``
    observations, so the loop ends even if the clock stalls."""
    if wait_s < 0 or poll_s <= 0:
        raise ValueError(f"wait_s must be >= 0 and poll_s > 0, got {wait_s}, {poll_s}")
    started = monotonic()
    deadline = started + wait_s
    budget = math.ceil(wait_s / poll_s) + 1
    polls = 0
    while True:
        verdict = observe()
        polls += 1
        left = deadline - monotonic()
        if verdict.idle or polls >= budget or left <= 0:
            return WaitResult(verdict, polls, monotonic() - started)
        sleep(min(poll_s, left))
