"""Benchmark: ``select`` on synthetic boards of 1,000 and 10,000 issues, 20 comments each.

Selection runs every timer period over the whole board (D1: one query, eligibility re-derived
from scratch every cycle, D9), so its cost must grow linearly with the board: a 10x larger board
should cost about 10x, not 100x. The figure that matters is the 10k/1k ratio measured in one run
on one machine — an absolute time says more about the box than about the code.

    python bench/select_bench.py            # exits 1 when the ratio shows super-linear growth
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Run from a checkout without installing: the repository root holds the ``fleet`` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.core.markers import Kind, render
from fleet.core.model import (
    Capacity,
    CapacitySource,
    Comment,
    Event,
    EventKind,
    Issue,
    IssueRef,
    IssueState,
    Reach,
    Snapshot,
    Unit,
    WorkerView,
)
from fleet.core.select import select

SIZES = (1_000, 10_000)
COMMENTS_PER_ISSUE = 20  # the issue's figure; a long-lived issue's thread, not a fresh one
REPETITIONS = 5  # median of 5 absorbs one GC pause or scheduler hiccup without a long run
# Linear growth gives a ratio near 10 and quadratic near 100. 20 is twice the linear figure: it
# leaves room for cache and allocator effects of a 10x larger working set and for a noisy shared
# machine, while n log n (about 13) passes and anything quadratic fails by a wide margin.
MAX_RATIO = 20.0
LIVE_FRACTION = 0.01  # share of issues with a live unit: runs in flight grow with the board
SEED = 20250101

T0 = datetime(2025, 1, 1, tzinfo=UTC)
FLEET = "fleet"
LANES = ("a", "b", "c", "d")


def _history(rng: random.Random, number: int) -> tuple[tuple[Comment, ...], tuple[Event, ...]]:
    """Twenty comments of a plausible thread: runs (start + terminal), chat, parks and releases."""
    comments: list[Comment] = []
    events: list[Event] = []
    at = T0 + timedelta(hours=number)
    while len(comments) < COMMENTS_PER_ISSUE:
        at += timedelta(minutes=rng.randint(1, 90))
        roll = rng.random()
        cid = number * 100 + len(comments)
        if roll < 0.45 and len(comments) < COMMENTS_PER_ISSUE - 1:
            end = rng.choice(
                [Kind.FAILED, Kind.FAILED, Kind.CAPACITY, Kind.PARKED, Kind.SUCCESS, Kind.REAPED]
            )
            fields = {"run": f"{number}-{cid}", "worker": rng.choice(LANES)}
            if end is Kind.PARKED:
                fields["due"] = (at + timedelta(minutes=8)).isoformat()
            comments.append(Comment(cid, FLEET, render(Kind.START, fields), at))
            at += timedelta(minutes=rng.randint(1, 60))
            note = "Tried the obvious fix; closes #12 was the wrong guess."
            comments.append(Comment(cid + 1, FLEET, render(end, fields, note), at))
        elif roll < 0.55:
            comments.append(Comment(cid, "octocat", "fleet:release\nplease retry", at))
        elif roll < 0.60:
            comments.append(Comment(cid, "octocat", render(Kind.PARK, None, "hold on"), at))
        elif roll < 0.65:
            comments.append(Comment(cid, "octocat", "> fleet:release\nquoted, not a release", at))
        else:
            seen = rng.randint(1, 9999)
            body = f"Looks related to #{seen}; fixes the criterion from VERIFY #6038."
            comments.append(Comment(cid, rng.choice(["octocat", "hubot"]), body, at))
        if rng.random() < 0.03:
            events.append(Event(EventKind.REOPENED, at + timedelta(seconds=1), "octocat"))
    return tuple(comments[:COMMENTS_PER_ISSUE]), tuple(events)


def _ref(rng: random.Random, n: int) -> IssueRef:
    state = IssueState.OPEN if rng.random() < 0.4 else IssueState.CLOSED
    return IssueRef(rng.randint(1, n), state)


def board(n: int, seed: int = SEED) -> Snapshot:
    """A deterministic synthetic board of ``n`` issues and four workers (one capacity-dark)."""
    rng = random.Random(seed + n)
    issues = []
    for number in range(1, n + 1):
        comments, events = _history(rng, number)
        labels = rng.choice([(), (), ("bug",), ("feature",), ("hold",), ("fleet-fixture",)])
        issues.append(
            Issue(
                number=number,
                title=f"work item {number}",
                body="Do the thing. See #1 for context.",
                labels=labels,
                assignees=("alice",) if rng.random() < 0.03 else (),
                status=rng.choice(["Todo"] * 8 + ["In progress", "Done"]),
                lane=rng.choice([None, *LANES]),
                parent=_ref(rng, n) if rng.random() < 0.2 else None,
                blocked_by=tuple(_ref(rng, n) for _ in range(rng.choice([0, 0, 0, 1, 2]))),
                sub_issues=tuple(_ref(rng, n) for _ in range(rng.choice([0] * 19 + [3]))),
                comments=comments,
                events=events,
                created_at=T0,
            )
        )
    running = rng.sample(range(1, n + 1), int(n * LIVE_FRACTION))
    units: dict[str, list[Unit]] = {lane: [] for lane in LANES}
    for k, issue in enumerate(running):
        lane = LANES[k % len(LANES)]
        units[lane].append(Unit(issue, f"w-{lane}", "agent", "active", k + 1))
    dark = Capacity(CapacitySource.RATE_LIMIT, None, "429 in the bench")
    workers = tuple(
        WorkerView(f"w-{lane}", lane, Reach.OK, dark if lane == "d" else None, tuple(units[lane]))
        for lane in LANES
    )
    now = T0 + timedelta(hours=n + 200)
    return Snapshot(now=now, issues=tuple(issues), workers=workers)


def _once(snap: Snapshot) -> float:
    gc.collect()  # start each run clean, so one run does not pay for the previous one's garbage
    t0 = time.perf_counter()
    select(snap)
    return time.perf_counter() - t0


def time_boards(snaps: dict[int, Snapshot]) -> dict[int, float]:
    """Median wall time of ``select`` per board over :data:`REPETITIONS` rounds, in seconds.

    The boards take turns within each round, so a burst of load on a shared machine lands on both
    sizes rather than inflating one side of the ratio.
    """
    samples: dict[int, list[float]] = {n: [] for n in snaps}
    for _ in range(REPETITIONS):
        for n, snap in snaps.items():
            samples[n].append(_once(snap))
    return {n: statistics.median(xs) for n, xs in samples.items()}


def main() -> int:
    snaps = {n: board(n) for n in SIZES}
    plans = {n: select(snap) for n, snap in snaps.items()}  # warm-up, and the mix for the record
    timings = time_boards(snaps)
    for n in SIZES:
        print(
            f"{n:>6} issues x {COMMENTS_PER_ISSUE} comments: select {timings[n] * 1000:8.1f} ms "
            f"(median of {REPETITIONS}), {timings[n] / n * 1e6:6.1f} us/issue  "
            f"[{plans[n].summary()}]"
        )
    small, large = SIZES
    ratio = timings[large] / timings[small]
    print(
        f"ratio {large}/{small}: {ratio:.1f} (linear ~{large / small:.0f}, limit {MAX_RATIO:.0f})"
    )
    if ratio > MAX_RATIO:
        print(f"FAIL: select grows super-linearly (ratio {ratio:.1f} > {MAX_RATIO:.0f})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
