"""The timeline's I/O: the trace read from ``since`` on, and the sweeper's page refreshed per tick."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleet.cmd.sched import schedule
from fleet.timeline.write import read_records
from tests.integration.fleet_fixture import make_fleet

T = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_trace_is_read_from_since_on_and_a_damaged_line_ends_it_by_name(tmp_path):
    path = tmp_path / "trace.jsonl"
    lines = [
        json.dumps(
            {"at": (T + timedelta(hours=h)).isoformat(), "event": "TICK", "n": h}, sort_keys=True
        )
        for h in range(5)
    ]
    lines.insert(3, json.dumps({"at": T.isoformat(), "event": "CLAIM"}))  # not drawn: skipped
    path.write_text("\n".join([*lines, "{half a line", lines[-1]]) + "\n")
    warned: list[str] = []
    got = read_records(path, warned.append, since=T + timedelta(hours=2))
    assert [r["n"] for r in got] == [2, 3, 4]
    assert len(warned) == 1 and f"{path}:7" in warned[0]
    assert read_records(tmp_path / "none.jsonl") == []


def test_schedule_with_timeline_rewrites_the_page_in_the_state_dir_every_tick(tmp_path):
    f = make_fleet(tmp_path, ("w1",))
    try:
        n = f.board.create_issue("Draw me", "body")
        page = Path(f.inventory.state_dir) / "timeline.html"
        schedule(str(f.inventory_path), True, False, timeline=True)
        first = page.read_text()
        assert 'class="sweep"' in first and 'data-launched="1"' in first
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
            c.body.startswith("▶ fleet:start")
            for c in f.board.issue(n).comments  # type: ignore[union-attr]
        ):
            time.sleep(0.5)
        schedule(str(f.inventory_path), False, False, timeline=True)  # a dry run draws too
        assert f'data-issue="{n}"' in page.read_text() and "Draw me" in page.read_text()
    finally:
        f.ctx.close()
