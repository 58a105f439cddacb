"""Benchmark: the timeline page at 200 and 2,000 runs a day (``invoke timeline``, and the sweeper's
``--timeline`` every tick), and its PNG through headless Chromium.

Peer: ``json.dumps`` of the same runs as plain records — the cost of merely writing down what the
picture shows. The reading is build+render time over the peer's, and the page's size per run.

    python bench/timeline_bench.py          # prints one line per size
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.core.markers import Kind, render
from fleet.core.model import Comment, Issue
from fleet.timeline import browser
from fleet.timeline.model import WorkerRef, build
from fleet.timeline.render import page
from fleet.timeline.write import write_page, write_png
from fleet.trace import to_jsonable

T = datetime(2026, 1, 1, tzinfo=UTC)
KINDS = [Kind.SUCCESS, Kind.FAILED, Kind.NO_OP, Kind.PR_OPEN, Kind.TIMED_OUT, Kind.CAPACITY]
REPETITIONS = 3


def day(runs: int, workers: int = 4) -> list[Issue]:
    rnd = random.Random(runs)
    out = []
    for n in range(1, runs + 1):
        s = rnd.uniform(0, 86400 - 3000)
        fields = {"run": f"r{n}", "worker": f"w{rnd.randint(1, workers)}", "master": "alpha"}
        start = Comment(2 * n, "fleet", render(Kind.START, fields), T + timedelta(seconds=s))
        end_at = T + timedelta(seconds=s + rnd.uniform(120, 3000))
        end = Comment(2 * n + 1, "fleet", render(rnd.choice(KINDS), {"run": f"r{n}"}), end_at)
        out.append(Issue(n, f"work {n}", comments=(start, end)))
    return out


def best(fn) -> float:
    times = []
    for _ in range(REPETITIONS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    workers = [WorkerRef(f"w{i}", "alpha") for i in range(1, 5)]
    for runs in (200, 2000):
        issues = day(runs)
        now = T + timedelta(days=1)

        def ours(issues=issues, now=now) -> str:
            tl = build(issues, [], now=now, since=T, workers=workers, identity="fleet")
            return page(tl)

        tl = build(issues, [], now=now, since=T, workers=workers, identity="fleet")
        peer_s = best(
            lambda tl=tl: json.dumps([to_jsonable(dataclasses.asdict(r)) for r in tl.runs])
        )
        ours_s = best(ours)
        size = len(ours().encode())
        line = (
            f"{runs:5d} runs: build+render {ours_s * 1000:7.1f} ms, peer json.dumps "
            f"{peer_s * 1000:6.1f} ms, ratio {ours_s / peer_s:5.1f}x, page {size / 1024:7.1f} KiB "
            f"({size / runs:6.0f} B/run)"
        )
        if browser.find():
            with tempfile.TemporaryDirectory() as d:
                html = write_page(tl, Path(d) / "t.html")
                png_s = best(lambda html=html, d=d, tl=tl: write_png(tl, html, Path(d) / "t.png"))
            line += f", PNG {png_s:5.1f} s"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
