"""``replay`` reproduces a recorded sweep: the production tick on a real board and real local
workers writes its trace, and every SWEEP in it, handed back to ``select``, gives the recorded plan
(seed 001 §9). A tampered plan is reported decision by decision with exit 60; a malformed line is a
named error with its file and line (59); a trace with nothing replayable says so (58)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.core.exits import Exit
from fleet.roles.sweeper import tick
from fleet.trace import TraceError
from fleet.trace.replay import replay_file
from tests.integration.fleet_fixture import Fleet, make_fleet

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Path]]:
    """Two real sweeps (dry runs) over a board with work, holds, a blocker and a lane."""
    f = make_fleet(tmp_path_factory.mktemp("replay"), ("w1", "w2"))
    try:
        board = f.board
        board.create_issue("Add a greeting")
        board.create_issue("Add a farewell", lane="w2")
        board.create_issue("Not now", labels=["hold"])
        first = board.create_issue("First step")
        second = board.create_issue("Second step")
        board.add_blocker(second, first)  # type: ignore[attr-defined]
        board.create_issue("[do-not-dispatch] spike notes")
        board.create_issue("Owned", assignees=["alice"])
        for _ in range(2):
            report = tick(f.ctx, apply=False)
            assert report.outcome == "dry-run", report
        yield f, Path(f.inventory.state_dir) / "trace.jsonl"
    finally:
        f.ctx.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line: ``invoke replay ...`` from the repository's tasks.py."""
    return subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(REPO), "replay", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_a_recorded_sweep_replays_with_no_difference(recorded: tuple[Fleet, Path]) -> None:
    _f, trace = recorded
    report = replay_file(trace)
    assert len(report.replayed) == 2 and report.exit() is Exit.OK, report.lines()
    sweep = report.replayed[0]
    assert sweep.event == "SWEEP" and sweep.reproduced
    assert sweep.comparison.decisions == 7  # one per open issue
    done = _cli(str(trace))
    assert done.returncode == 0, done.stderr
    assert "2 event(s) replayed, 2 reproduced, 0 differ; not replayable: IDLE×2" in done.stdout


def test_a_tampered_plan_is_reported_per_issue(
    recorded: tuple[Fleet, Path], tmp_path: Path
) -> None:
    _f, trace = recorded
    records = _records(trace)
    plan = records[0]["plan"]
    assert isinstance(plan, dict) and plan["dispatch"], plan
    moved = plan["dispatch"][0]
    sent_to = moved["worker"]
    moved["worker"] = "w9"  # the recording says it went somewhere select would not send it
    held = next(w for w in plan["waiting"] if w["state"] == "held")
    plan["waiting"].remove(held)  # and it forgot a held issue
    copy = _write(tmp_path / "tampered.jsonl", records)

    report = replay_file(copy)
    assert report.exit() is Exit.REPLAY_DIFFERS
    (bad,) = report.differing
    assert bad.line == 1 and report.replayed[1].reproduced  # the untouched second sweep
    by_issue = {d.issue: d for d in bad.comparison.differences}
    assert set(by_issue) == {moved["issue"], held["issue"]}
    assert by_issue[moved["issue"]].recorded.startswith("dispatch to w9")
    assert by_issue[moved["issue"]].now.startswith(f"dispatch to {sent_to} (")
    assert by_issue[held["issue"]].recorded == "(no decision)"
    assert by_issue[held["issue"]].now.startswith("held (p9)")

    done = _cli(str(copy))
    assert done.returncode == Exit.REPLAY_DIFFERS == 60, done.stderr
    assert f"#{moved['issue']} decision: recorded dispatch to w9" in done.stdout
    assert "1 differ" in done.stderr


def test_a_reordered_dispatch_list_is_a_difference(
    recorded: tuple[Fleet, Path], tmp_path: Path
) -> None:
    _f, trace = recorded
    records = _records(trace)[:1]
    plan = records[0]["plan"]
    assert isinstance(plan, dict) and len(plan["dispatch"]) >= 2, plan
    plan["dispatch"].reverse()
    report = replay_file(_write(tmp_path / "order.jsonl", records))
    (diff,) = report.differing[0].comparison.differences
    assert (diff.issue, diff.aspect) == (None, "dispatch order")


def test_a_malformed_line_is_named_with_its_file_and_line(
    recorded: tuple[Fleet, Path], tmp_path: Path
) -> None:
    _f, trace = recorded
    lines = trace.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2] + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as err:
        replay_file(broken)
    assert (err.value.path, err.value.line) == (str(broken), 2)
    done = _cli(str(broken))
    assert done.returncode == Exit.TRACE_UNREADABLE == 59
    assert f"{broken}:2: not a JSON line" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_snapshot_that_does_not_decode_is_named_with_its_line(
    recorded: tuple[Fleet, Path], tmp_path: Path
) -> None:
    _f, trace = recorded
    records = _records(trace)
    sweeps = [n for n, r in enumerate(records, 1) if r["event"] == "SWEEP"]
    snap = records[sweeps[1] - 1]["snapshot"]
    assert isinstance(snap, dict)
    snap["issues"][0]["state"] = "ajar"
    bad = _write(tmp_path / "bad-snapshot.jsonl", records)
    with pytest.raises(TraceError) as err:
        replay_file(bad)
    assert err.value.line == sweeps[1]
    assert "SWEEP: snapshot.issues[0].state: 'ajar' is not a IssueState" in str(err.value)


def test_a_missing_trace_is_unreadable(tmp_path: Path) -> None:
    done = _cli(str(tmp_path / "nope.jsonl"))
    assert done.returncode == Exit.TRACE_UNREADABLE
    assert "cannot open" in done.stderr


def test_a_trace_with_nothing_replayable_says_so(tmp_path: Path) -> None:
    other = _write(tmp_path / "other.jsonl", [{"event": "CLAIM", "at": "x"}] * 2)
    report = replay_file(other)
    assert report.exit() is Exit.NOTHING_TO_REPLAY
    assert "no replayable event in 2 record(s)" in report.summary()
    assert "CLAIM×2" in report.summary()
    done = _cli(str(other))
    assert done.returncode == Exit.NOTHING_TO_REPLAY == 58
    assert "no replayable event" in done.stdout
