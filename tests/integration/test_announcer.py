"""The announcer on a real SQLite board and real local workers (portable supervisor), with a real
closed SSH port for an unreachable worker and the sweeper's real heartbeat file.

Idempotence is checked against the live board (run ``--apply`` twice: one report; close it and the
next run files it again — nothing remembers it but the board). A report is never dispatched by a
real sweep. Ages come from the board's clock: a second handle on the same board file whose clock
runs ahead plays "later", so no test sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.board.base import Board
from fleet.board.local import LocalBoard
from fleet.cmd.announce import announce_cmd
from fleet.context import FleetContext
from fleet.control.switches import (
    SwitchName,
    flag_path,
    remove_switch,
    write_halt_file,
    write_switch,
)
from fleet.core.announce import NO_RESET_BOUND_S, StallKind
from fleet.core.closing import has_live_keyword
from fleet.core.exits import Exit
from fleet.core.markers import Kind, render
from fleet.core.model import Capacity, CapacitySource, Issue, Status, WaitState
from fleet.observe import snapshot
from fleet.roles.announcer import AnnounceReport, announce
from fleet.roles.sweeper import tick
from fleet.runner.capacity import capacity_path, write_capacity
from fleet.trace import read_trace
from tests.integration.fleet_fixture import Fleet, all_comments, make_fleet, with_ghost

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def fleet_with_ghost(tmp_path: Path) -> Iterator[Fleet]:
    """w1 (local) and ghost: an SSH worker on a closed port, so its probe is could-not-check."""
    f = make_fleet(tmp_path, edit=with_ghost)
    try:
        yield f
    finally:
        f.ctx.close()


def later(f: Fleet, seconds: float) -> FleetContext:
    """The same board file read through a clock ``seconds`` ahead: the board's "later"."""
    cfg = f.inventory.board
    assert cfg.path is not None
    board = LocalBoard(
        cfg.path,
        cfg.origin,
        identity=cfg.identity,
        clock=lambda: datetime.now(UTC) + timedelta(seconds=seconds),
    )
    return FleetContext(f.inventory, board)


def beat(f: Fleet) -> None:
    """A real --apply sweep writes the real heartbeat file, as the timer's sweeper does (a dry run
    writes its own file); a pause keeps it from launching this test's issues."""
    pause = flag_path(f.inventory, SwitchName.PAUSE)
    write_switch(SwitchName.PAUSE, pause, "test: heartbeat only", author="test")
    try:
        assert tick(f.ctx, apply=True).outcome == "paused"
    finally:
        remove_switch(pause)


def tombstone(board: Board, title: str = "Add a greeting") -> int:
    n = board.create_issue(title)
    board.comment(n, render(Kind.START, {"run": "r1", "worker": "w1"}), author="fleet")
    board.comment(n, render(Kind.SUCCESS, {"pr": "#1"}), author="fleet")
    return n


def open_titled(board: Board, title: str) -> list[Issue]:
    return [i for i in board.read().issues if i.title == title]


def stall_kinds(report: AnnounceReport) -> list[StallKind]:
    return [s.kind for s in report.assessment.stalls]


def test_announce_apply_twice_files_one_report(fleet: Fleet) -> None:
    beat(fleet)
    n = tombstone(fleet.board)
    first = announce(fleet.ctx, apply=True)
    assert (first.outcome, first.exit) == ("filed", Exit.OK)
    (filing,) = first.filings
    assert filing.outcome == "filed" and filing.number is not None
    assert filing.report.title == f"fleet: tombstone #{n} (success marker on an open issue)"
    second = announce(fleet.ctx, apply=True)
    assert second.outcome == "nothing"
    assert [(f.outcome, f.number) for f in second.filings] == [("already-open", filing.number)]
    (report,) = open_titled(fleet.board, filing.report.title)
    assert report.number == filing.number
    assert report.labels == (fleet.inventory.policy.report_label,)
    assert report.status is None  # not queued, besides being held by its label
    assert not has_live_keyword(report.title) and not has_live_keyword(report.body)
    # A dry run reads the same live board and says so.
    dry = announce(fleet.ctx, apply=False)
    assert [f.outcome for f in dry.filings] == ["already-open"]


def test_idempotence_is_the_live_board_not_a_memory(fleet: Fleet) -> None:
    beat(fleet)
    tombstone(fleet.board)
    (first,) = announce(fleet.ctx, apply=True).filings
    assert first.number is not None
    fleet.board.close(first.number)  # a human closes the report; the stall is still there
    (again,) = announce(fleet.ctx, apply=True).filings
    assert again.outcome == "filed" and again.number not in (None, first.number)
    assert len(open_titled(fleet.board, first.report.title)) == 1


def test_a_report_is_never_dispatched(fleet: Fleet) -> None:
    beat(fleet)
    tombstone(fleet.board)
    (filing,) = announce(fleet.ctx, apply=True).filings
    number = filing.number
    assert number is not None
    # Even queued by hand (Status Todo), the report label holds it: a real sweep launches nothing.
    fleet.board.set_status(number, Status.TODO.value)
    report = tick(fleet.ctx, apply=True)
    assert report.outcome == "idle" and not report.results
    waiting = report.plan.reason_for(number)
    assert waiting is not None and (waiting.predicate, waiting.state) == (9, WaitState.HELD)
    issue = fleet.board.issue(number)
    assert issue is not None and issue.comments == ()  # no run ever touched it


def test_heartbeat_staleness_comes_from_the_real_heartbeat_file(fleet: Fleet) -> None:
    period = fleet.inventory.policy.timer_period_s
    missing = announce(fleet.ctx, apply=False)
    assert stall_kinds(missing) == [StallKind.HEARTBEAT_MISSING]
    beat(fleet)
    fresh = announce(fleet.ctx, apply=False)
    assert stall_kinds(fresh) == []
    assert any(q.subject == "sweeper" and q.state == "beating" for q in fresh.assessment.quiet)
    with later(fleet, 2 * period + 60) as ctx:
        stale = announce(ctx, apply=True)
        assert stall_kinds(stale) == [StallKind.HEARTBEAT_STALE]
        assert [f.report.title for f in stale.filings] == ["fleet: sweeper heartbeat stale"]
        assert announce(ctx, apply=True).outcome == "nothing"
    assert len(open_titled(fleet.board, "fleet: sweeper heartbeat stale")) == 1


def test_a_start_on_an_unreachable_worker_past_the_threshold_is_announced(
    fleet_with_ghost: Fleet,
) -> None:
    f = fleet_with_ghost
    beat(f)
    start = render(Kind.START, {"run": "r9", "worker": "ghost", "master": "root"})
    stranded = f.board.create_issue("Port the parser")
    f.board.comment(stranded, start, author="fleet")
    held = f.board.create_issue("Not now", labels=["hold"])
    f.board.comment(held, start, author="fleet")
    young = announce(f.ctx, apply=False)
    assert StallKind.START_UNCHECKED not in stall_kinds(young)  # within the threshold
    threshold = f.inventory.policy.reaper_threshold_s
    with later(f, threshold + 600) as ctx:
        report = announce(ctx, apply=True)
    starts = [s for s in report.assessment.stalls if s.kind is StallKind.START_UNCHECKED]
    assert [(s.issue, s.worker) for s in starts] == [(stranded, "ghost")]
    title = f"fleet: stalled #{stranded} (start on unreachable ghost)"
    assert len(open_titled(f.board, title)) == 1
    # The held one is the mechanism working: named, not announced.
    quiet = {q.subject: q.state for q in report.assessment.quiet}
    assert quiet[f"#{held}"] == "held" and quiet["worker ghost"] == "unreachable"


def test_a_dark_worker_with_no_stated_reset_is_dated_by_its_capacity_marker(fleet: Fleet) -> None:
    beat(fleet)
    w = fleet.inventory.worker("w1")
    assert w is not None
    n = fleet.board.create_issue("Rate-limited work")
    fleet.board.comment(n, render(Kind.START, {"run": "r1", "worker": "w1"}), author="fleet")
    fleet.board.comment(n, render(Kind.CAPACITY, {"source": "rate_limit"}), author="fleet")
    fleet.board.close(n)  # done elsewhere since: the page no longer holds it
    cap = Capacity(CapacitySource.RATE_LIMIT, None, "You've hit your limit", None, n)
    write_capacity(capacity_path(Path(w.state_dir)), cap)
    assert announce(fleet.ctx, apply=False).assessment.stalls == ()  # just went dark
    with later(fleet, NO_RESET_BOUND_S + 600) as ctx:
        report = announce(ctx, apply=False)
    dark = [s for s in report.assessment.stalls if s.kind is StallKind.DARK_NO_RESET]
    assert [s.worker for s in dark] == ["w1"]
    assert f"capacity marker on #{n}" in dark[0].detail


def test_a_real_capacity_file_past_its_reset_is_never_silent(fleet: Fleet) -> None:
    """D20: "dark past its reset" must not look like "dark, wait". Either the probe lets the
    passed reset take work again (the mechanism working), or the announcer reports it."""
    beat(fleet)
    w = fleet.inventory.worker("w1")
    assert w is not None
    reset = datetime.now(UTC) - timedelta(hours=2)
    write_capacity(
        capacity_path(Path(w.state_dir)),
        Capacity(CapacitySource.RATE_LIMIT, reset, "You've hit your limit", reset, None),
    )
    report = announce(fleet.ctx, apply=False)
    (seen,) = [v for v in snapshot(fleet.ctx).workers if v.name == "w1"]
    announced = [s.worker for s in report.assessment.stalls if s.kind is StallKind.DARK_PAST_RESET]
    assert announced == ["w1"] or not seen.dark


def test_a_halted_fleet_files_nothing(fleet: Fleet) -> None:
    tombstone(fleet.board)  # and no heartbeat: two stalls, both held back
    write_halt_file(Path(fleet.inventory.halt.file), "forge migration", author="ops")
    before = (all_comments(fleet.board), len(fleet.board.read().issues))
    report = announce(fleet.ctx, apply=True)
    assert (report.outcome, report.exit) == ("halted", Exit.OK) and report.filings == []
    assert (all_comments(fleet.board), len(fleet.board.read().issues)) == before
    assert {q.state for q in report.assessment.quiet} >= {"halted"}


def test_an_unreadable_board_fails_closed_only_for_apply(fleet: Fleet) -> None:
    path = fleet.inventory.board.path
    assert path is not None
    fleet.board.disconnect()  # type: ignore[attr-defined]
    path.write_bytes(b"not a database" * 200)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with FleetContext(fleet.inventory, LocalBoard(path, fleet.inventory.board.origin)) as ctx:
        assert announce(ctx, apply=True).exit is Exit.BOARD_UNREADABLE
        dry = announce(ctx, apply=False)
    assert (dry.outcome, dry.exit) == ("failed", Exit.OK) and dry.filings == []


def test_every_pass_is_traced(fleet: Fleet) -> None:
    beat(fleet)
    tombstone(fleet.board)
    announce(fleet.ctx, apply=True)
    events = read_trace(Path(fleet.inventory.state_dir) / "trace.jsonl")
    mine = [e for e in events if e["event"] == "ANNOUNCE"]
    assert len(mine) == 1 and mine[0]["apply"] is True
    assert mine[0]["stalls"][0]["kind"] == "tombstone" and "snapshot" in mine[0]
    flow = [e["event"] for e in events if e.get("loop") == "announcer"]
    assert flow == ["CLAIM", "DISPATCH", "LAND", "RELEASE", "IDLE"]


def test_the_dry_run_says_what_it_would_file_and_what_it_keeps_quiet(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    beat(fleet)
    n = tombstone(fleet.board, "Fix the thing, closes #1")  # attacker-ish text, quoted back
    held = fleet.board.create_issue("Parked by a human", labels=["hold"])
    announce_cmd(str(fleet.inventory_path), False, False)
    out = capsys.readouterr().out
    assert f"would file: fleet: tombstone #{n}" in out
    assert f"#{held}" in out and "hold label 'hold'" in out
    assert not has_live_keyword(out)
    assert len(fleet.board.read().issues) == 2  # a dry run files nothing
