"""The canary probe: a rate-limit darkness with no stated reset is not dark forever (D8).

A worker is dark while its capacity file says so, and only a clean run that started after the file
was written deletes it (:mod:`fleet.runner.heal`). When the provider stated a reset, the clock
clears the darkness at that instant. When it stated none, no clock can — and no dispatch is sent to
a dark worker — so without a probe the worker would stay dark until a human noticed. The probe:
once ``CANARY_PERIOD_S`` has passed since the later of the file's ``written_at`` and its last
canary's ``canary_at``, the worker takes exactly ONE run, the canary:

* a clean canary deletes the file (it started after the file was written): the worker is back;
* a canary that meets the limit again rewrites the file: dark for another period;
* a canary that fails for any other reason leaves the file; the runner stamped ``canary_at`` when it
  started, so the next canary waits a full period again.

"One" holds because a canary is open only while the worker has no live unit at all: the dispatcher
re-checks that on the probe it takes under the fleet lock (D4), and a batch sends one run per open
canary. A ``revoked`` file has no canary: a credential does not come back by itself, so only a
human who renews it clears the file.

Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from fleet.core.model import Capacity, CapacitySource, Unit

# The shortest window a provider rate limit is stated in is five hours (the agent CLI's
# rate_limit_event carries rateLimitType five_hour | seven_day | ..., docs/facts.md).
# A five-hour window that was open when the limit hit has certainly reset five hours later, so the
# first canary cannot be wasted on a session limit that is still running; a seven-day limit costs
# one canary per five hours, each a run that dies in seconds on the limit text, and a capacity death
# does not spend the attempt budget (D8). Shorter would re-probe a session limit that is
# still certainly on; longer would hold a healed worker idle past the window that healed it.
CANARY_PERIOD_S = 5 * 3600

# fleet-status's word for a dark worker that takes one canary run now.
CANARY = "canary"


def unknown_reset(cap: Capacity | None) -> bool:
    """A rate limit whose reset the provider did not state: the only darkness a canary probes."""
    return cap is not None and cap.source is CapacitySource.RATE_LIMIT and cap.reset_at is None


def canary_due(cap: Capacity) -> datetime | None:
    """When the next canary may go, or None when this darkness has no canary (revoked, a stated
    reset, or a file with no ``written_at`` to count from)."""
    if not unknown_reset(cap):
        return None
    stamps = [t for t in (cap.written_at, cap.canary_at) if t is not None]
    if not stamps:
        return None
    return max(stamps) + timedelta(seconds=CANARY_PERIOD_S)


def canary_open(cap: Capacity | None, units: Iterable[Unit], now: datetime) -> bool:
    """True when ``cap``'s worker may take its one canary run now: the period has passed and the
    worker has no live unit (a live one may be the canary already, or a run that can still meet
    the limit and tell us more)."""
    if cap is None:
        return False
    due = canary_due(cap)
    return due is not None and due <= now and not any(u.live for u in units)


def canary_text(cap: Capacity, units: Iterable[Unit], now: datetime) -> str:
    """fleet-status's one line on a rate-limit darkness with no stated reset."""
    due = canary_due(cap)
    if due is None:
        return "no written_at in the capacity file, so no canary can be timed: delete it by hand"
    live = [u.name for u in units if u.live]
    if due > now:
        left = int((due - now).total_seconds())
        return f"one canary run allowed at {due.isoformat(timespec='seconds')} (in {left // 60}m)"
    if live:
        return f"canary due; waits until no unit is live here ({', '.join(live)})"
    return "canary due: the next dispatch here is the one probe run (a clean run heals the worker)"
