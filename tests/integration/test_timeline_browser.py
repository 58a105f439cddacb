"""The timeline page in a real headless Chromium: no script error, no fetch, the expected bars, lanes
and bands in the rendered DOM, hover and keyboard focus show a run, a hostile title stays text; and
the PNG that ``--png`` writes is a real picture of it."""

from __future__ import annotations

import itertools
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from fleet.core.markers import Kind
from fleet.timeline import browser
from fleet.timeline.model import WorkerRef, build
from fleet.timeline.render import COLOURS
from fleet.timeline.write import write_page, write_png
from fleet.units.procs import alive
from tests.builders import FLEET, issue, marker
from tests.cdp import Chromium

T = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
HOSTILE = (
    "</title><script>document.body.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">\"'><svg onload=alert(1)>\u202e"
)


def at(s: float) -> datetime:
    return T + timedelta(seconds=s)


def _start(run: str, worker: str, s: float):
    return marker(Kind.START, {"run": run, "worker": worker, "master": "alpha"}, at=at(s))


def _end(kind: Kind, s: float, **fields):
    return marker(kind, fields, "the marker's note", at=at(s))


def fleet_history():
    issues = [
        issue(
            1, "Add a greeting", timeline=[_start("r1", "w1", 0), _end(Kind.SUCCESS, 300, run="r1")]
        ),
        issue(
            2, HOSTILE, timeline=[_start("r2", "w2", 60), _end(Kind.FAILED, 200, run="r2", exit=1)]
        ),
        issue(
            3,
            "Duplicate pair",
            timeline=[
                _start("keep", "w1", 400),
                _start("dup", "w2", 410),
                _end(Kind.SUPERSEDED, 430, kept="w1/alpha", stopped="w2/alpha"),
                _end(Kind.PR_OPEN, 900, run="keep"),
            ],
        ),
        issue(4, "Orphan", timeline=[_start("r4", "w3", 100), _end(Kind.REAPED, 1500, run="r4")]),
        issue(
            5,
            "Rate limited",
            timeline=[
                _start("r5", "w3", 1600),
                _end(
                    Kind.CAPACITY, 1650, run="r5", source="rate_limit", reset=at(5000).isoformat()
                ),
            ],
        ),
        issue(6, "Still going", timeline=[_start("r6", "w1", 1700)]),
    ]
    halt = {
        "source": "file",
        "reason": "bad deploy",
        "author": "al",
        "where": "/x/HALT",
        "since": None,
    }
    trace = []
    for i, s in enumerate(range(0, 2400, 300)):
        trace.append(
            {
                "event": "SWEEP",
                "at": at(s).isoformat(),
                "apply": True,
                "summary": "x",
                "snapshot": {"workers": [], "halts": []},
            }
        )
        trace.append(
            {
                "event": "TICK",
                "at": at(s + 1).isoformat(),
                "apply": True,
                "outcome": "dispatched" if i % 2 == 0 else "paused",
                "summary": "x",
                "launched": [{"issue": 1, "worker": "w1"}] if i == 0 else [],
                "refused": [{"issue": 5, "code": 24, "reason": "dark"}] if i == 6 else [],
                "switches": {"pause": {"reason": "window"} if s >= 1800 else None, "drain": None},
                "halts": [halt] if 900 <= s < 1500 else [],
            }
        )
    return build(
        issues,
        trace,
        now=at(2400),
        since=at(-86400),
        workers=[WorkerRef(w, "alpha") for w in ("w1", "w2", "w3")],
        identity=FLEET,
    )


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    if browser.find() is None:
        pytest.fail("no chromium on PATH: `invoke test` and .ci/run install Debian's package")
    return write_page(fleet_history(), tmp_path_factory.mktemp("tl") / "timeline.html")


def test_the_page_runs_its_script_without_error_and_draws_bars_lanes_and_bands(page_file, tmp_path):
    with Chromium() as page:
        page.open(page_file.as_uri())
        assert page.js("document.body.getAttribute('data-ready')") == "1"
        assert page.js("document.getElementById('errors').textContent") == ""
        lanes = page.js("[...document.querySelectorAll('.lane')].map(e => e.dataset.worker)")
        assert lanes == ["sweeper", "w1", "w2", "w3"]
        runs = page.js(
            "[...document.querySelectorAll('.run')].map(e => e.dataset.run + ':' + e.dataset.outcome)"
        )
        assert sorted(runs) == sorted(
            [
                "r1:success",
                "r2:failed",
                "keep:pr-open",
                "dup:superseded",
                "r4:reaped",
                "r5:capacity",
                "r6:running",
            ]
        )
        # the duplicate and the reaped start stand out: dashed outline and a glyph of their own
        dash = page.js(
            "getComputedStyle(document.querySelector('.run[data-run=dup] rect')).strokeDasharray"
        )
        assert dash not in ("", "none")
        assert page.js("document.querySelector('.run[data-run=r4] .flag').textContent") == "♻"
        bands = page.js("[...document.querySelectorAll('.band')].map(e => e.dataset.kind)")
        assert sorted(bands) == ["halt", "pause"]
        assert page.js("document.querySelectorAll('.dark[data-worker=w3]').length") == 1
        assert page.js("document.querySelectorAll('.sweep').length") == 8
        # a drawn bar has a size on screen: the rendered DOM, not just the markup
        w = page.js(
            "document.querySelector('.run[data-run=r1] rect').getBoundingClientRect().width"
        )
        assert w > 3
        page.screenshot(tmp_path / "shot.png")
        assert (tmp_path / "shot.png").stat().st_size > 10_000
        assert page.errors == []


def test_keyboard_focus_and_hover_show_the_run_and_a_hostile_title_stays_text(page_file):
    with Chromium() as page:
        page.open(page_file.as_uri())
        assert page.js("document.getElementById('tip').style.display") in ("", "none")
        page.key("Tab", "Tab", 9)  # the first focusable element: the first sweep tick
        for _ in range(12):
            if page.js("document.activeElement.dataset.run") == "r2":
                break
            page.key("Tab", "Tab", 9)
        assert page.js("document.activeElement.dataset.run") == "r2"
        tip = page.js("document.getElementById('tip').textContent")
        assert page.js("document.getElementById('tip').style.display") == "block"
        assert tip.startswith("#2 ") and "run r2 on w2 (alpha)" in tip
        assert (
            "outcome failed" in tip
            and "fleet:failed run=r2 exit=1" in tip
            and "duration 2m20s" in tip
        )
        # the title arrives as text, its bidi override made visible, and nothing in it ran
        assert "<script>document.body" in tip and "\\u202e" in tip
        assert page.js("document.body.getAttribute('data-pwned')") is None
        assert page.js("document.querySelectorAll('script').length") == 1
        assert page.js("document.querySelectorAll('img').length") == 0
        page.key("Escape", "Escape", 27)
        assert page.js("document.getElementById('tip').style.display") == "none"
        box = page.js(
            "(() => {const r = document.querySelector('.run[data-run=r1] rect').getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2];})()"
        )
        page.hover(*box)
        assert page.js("document.getElementById('tip').textContent").startswith("#1 Add a greeting")
        assert page.errors == []


def _has_colour(pixels: np.ndarray, hex_colour: str) -> int:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return int((np.abs(pixels[..., :3] - rgb).max(axis=-1) < 0.02).sum())


def test_the_png_is_the_same_picture(page_file, tmp_path):
    tl = fleet_history()
    png = write_png(tl, page_file, tmp_path / "timeline.png")
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 20_000
    pixels = image.imread(png)
    height, width = pixels.shape[:2]
    assert width >= 1400 and height >= 300
    for outcome in ("success", "failed", "superseded", "reaped", "capacity", "running"):
        assert _has_colour(pixels, COLOURS[outcome]) > 50, outcome


def busy_day(runs: int, workers: int = 4):
    """``runs`` runs over one day on ``workers`` workers: 2 to 50 minutes each, mixed outcomes."""
    import random

    rnd = random.Random(runs)
    kinds = [Kind.SUCCESS, Kind.FAILED, Kind.NO_OP, Kind.PR_OPEN, Kind.TIMED_OUT, Kind.CAPACITY]
    issues = []
    for n in range(1, runs + 1):
        s = rnd.uniform(0, 86400 - 3000)
        w = f"w{rnd.randint(1, workers)}"
        kind = rnd.choice(kinds)
        issues.append(
            issue(
                n,
                f"work {n}",
                timeline=[
                    _start(f"r{n}", w, s),
                    _end(kind, s + rnd.uniform(120, 3000), run=f"r{n}"),
                ],
            )
        )
    return build(
        issues,
        [],
        now=at(86400),
        since=at(0),
        workers=[WorkerRef(f"w{i}", "alpha") for i in range(1, workers + 1)],
        identity=FLEET,
    )


# Every bar's box on screen, grouped by lane: the readability checks below run on these.
_BOXES = """[...document.querySelectorAll('.lane')].filter(l => l.dataset.worker !== 'sweeper').map(l =>
  [...l.querySelectorAll('.run rect')].map(r => {const b = r.getBoundingClientRect();
   return [b.left, b.right, b.top, b.bottom];}))"""


@pytest.mark.parametrize("runs", [200, 2000])
def test_a_busy_day_stays_readable_every_bar_visible_and_none_on_another(runs, tmp_path):
    """200 runs a day and 2,000: every bar at least MIN_BAR_PX wide, no two bars of a lane overlap
    (a lane grows rows, the page scrolls sideways), and the aggregate strip counts them all."""
    from fleet.timeline.layout import MAX_PLOT_PX, MIN_BAR_PX

    tl = busy_day(runs)
    started = time.monotonic()
    page_file = write_page(tl, tmp_path / "busy.html")
    render_s = time.monotonic() - started
    assert render_s < 30  # a bound, not a benchmark: the sweeper draws this every tick
    with Chromium() as page:
        page.open(page_file.as_uri())
        assert page.js("document.body.getAttribute('data-ready')") == "1"
        assert page.js("document.querySelectorAll('.run').length") == runs
        lanes = page.js(_BOXES)
        assert sum(len(lane) for lane in lanes) == runs
        for boxes in lanes:
            assert all(right - left >= MIN_BAR_PX - 0.5 for left, right, _t, _b in boxes)
            boxes.sort(key=lambda b: (b[2], b[0]))
            for a, b in itertools.pairwise(boxes):
                if abs(a[2] - b[2]) < 1:  # same row
                    assert a[1] <= b[0] + 0.5, (a, b)
        width = page.js("document.getElementById('timeline').getBoundingClientRect().width")
        assert width <= MAX_PLOT_PX + 400
        assert page.js("document.querySelectorAll('.agg').length") > 0
        assert page.errors == []


def test_a_helper_that_outlives_the_browser_is_ended_and_the_profile_still_goes(tmp_path):
    """Chromium's helpers can outlive its main process and keep writing into the profile (a
    removal then failed on "Directory not empty"): the group is ended, then the profile removed."""
    data_dir = tmp_path / "profile"
    (data_dir / "Default").mkdir(parents=True)
    # The leader starts a writer into the profile and exits at once, as the browser's main does.
    script = 'while :; do touch "$1/Default/f$RANDOM"; sleep 0.001; done >/dev/null & echo $!'
    leader = subprocess.Popen(
        ["bash", "-c", script, "bash", str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    writer = int(leader.communicate(timeout=10)[0])
    assert alive(writer)  # the helper runs on after its leader is gone
    browser.end_group(leader.pid)
    browser.remove_profile(str(data_dir))
    assert not data_dir.exists()
    assert not alive(writer)
