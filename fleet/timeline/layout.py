"""Where things go on the picture: the time scale and the rows of each lane. Pure.

Readable at 2,000 runs (issue 14): the plot widens with the busiest lane (the page scrolls
sideways; never a smear of bars narrower than a pixel), a lane grows a row for each run that would
overlap another on screen, and a strip of runs-per-bucket on top aggregates the whole window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from fleet.timeline.model import Run

MIN_PLOT_PX = 1400  # one laptop screen of plot beside the lane labels
MAX_PLOT_PX = 24000  # a browser still scrolls this smoothly; past it a day is bucketed anyway
PX_PER_RUN = 12  # width budget per run of the busiest lane: 2,000 runs on 4 lanes -> 6,000 px
MIN_BAR_PX = 3  # a bar is never narrower: a 1 s run on a day's axis is still a mark to hover
GAP_PX = 2  # two bars on one row keep this much air between them
BUCKETS = 96  # the aggregate strip: a day in 15-minute buckets


@dataclass(frozen=True)
class Scale:
    since: datetime
    now: datetime
    left: float  # x of ``since``
    width: float  # px from ``since`` to ``now``

    def x(self, t: datetime) -> float:
        span = (self.now - self.since).total_seconds() or 1.0
        frac = (t - self.since).total_seconds() / span
        return self.left + min(1.0, max(0.0, frac)) * self.width


def plot_width(busiest_lane_runs: int) -> int:
    return max(MIN_PLOT_PX, min(MAX_PLOT_PX, busiest_lane_runs * PX_PER_RUN))


def bar_span(scale: Scale, run: Run) -> tuple[float, float]:
    x0 = scale.x(run.start)
    x1 = scale.x(run.until(scale.now))
    return x0, max(x1, x0 + MIN_BAR_PX)


def pack(scale: Scale, runs: Sequence[Run]) -> list[int]:
    """The row of each run (greedy interval packing on screen space): bars never overlap."""
    ends: list[float] = []
    rows = []
    for r in runs:
        x0, x1 = bar_span(scale, r)
        for i, end in enumerate(ends):
            if end + GAP_PX <= x0:
                ends[i] = x1
                rows.append(i)
                break
        else:
            ends.append(x1)
            rows.append(len(ends) - 1)
    return rows


def buckets(scale: Scale, runs: Sequence[Run], n: int = BUCKETS) -> list[dict[str, int]]:
    """Runs started per bucket, by outcome: the aggregate strip."""
    out: list[dict[str, int]] = [{} for _ in range(n)]
    span = (scale.now - scale.since).total_seconds() or 1.0
    for r in runs:
        i = int((r.start - scale.since).total_seconds() / span * n)
        i = min(n - 1, max(0, i))
        out[i][r.outcome] = out[i].get(r.outcome, 0) + 1
    return out
