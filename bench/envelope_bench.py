"""Benchmark: the close-out's envelope scan on real-shaped and crafted captures (run step 7/8).

The scan runs inside the close-out margin (``CLOSEOUT_MARGIN_S``), on text the agent controls, so
its cost must be a bounded multiple of the capture whatever the text. Two readings per capture:

* work: characters handed to the JSON decoder per character of capture (``scan_work``) — the
  machine-independent figure; the scan stops at ``WORK_FACTOR`` x plus ``WORK_FLOOR``;
* time ratio: the scan's time over one ``json.loads`` of a same-size valid document (the peer).

    python bench/envelope_bench.py         # exits 1 when a real-shaped capture costs > 1.5x work
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.runner.envelope import WORK_FACTOR, parse_capture, scan_work

SIZE = 4_700_000  # the crafted capture: 4.7 MB took 49 s before the bound
REPETITIONS = 3
ENVELOPE = json.dumps(
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 9, "result": "ok"}
)
REAL_MAX_WORK = 1.5  # a real capture decodes each line about once; 1.5x leaves room for braces


def _fill(line: str) -> str:
    return line * (SIZE // len(line))


CAPTURES = {
    "real: log noise + compact envelope": _fill("[tool] edit notes/x.md: ok {stray\n") + ENVELOPE,
    "real: JSON log lines + pretty envelope": _fill('{"level":"info","msg":"step"}\n')
    + json.dumps(json.loads(ENVELOPE), indent=2),
    "crafted: open object per line": _fill('{"a":\n') + ENVELOPE,
    "crafted: unterminated string per line": _fill('{"a":"x\n') + ENVELOPE,
    "crafted: one long line of openers": _fill('{"{"' * 5_000 + "\n") + ENVELOPE,
}


def _seconds(fn, arg) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(REPETITIONS):
        started = time.perf_counter()
        fn(arg)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> int:
    peer = json.dumps(["x" * 60] * (SIZE // 64))
    peer_s = _seconds(json.loads, peer)
    failed = False
    print(f"peer: json.loads of {len(peer):,} chars: {peer_s:.3f}s")
    for name, text in CAPTURES.items():
        spent, limit = scan_work(text)
        secs = _seconds(parse_capture, text)
        kind = parse_capture(text).kind
        work = spent / len(text)
        print(
            f"{name}: {len(text):,} chars, work {work:.2f}x (bound {limit / len(text):.2f}x), "
            f"time {secs / peer_s:.1f}x the peer, read as {kind}"
        )
        if name.startswith("real") and (work > REAL_MAX_WORK or str(kind) != "envelope"):
            failed = True
        if work > WORK_FACTOR + 1:
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
