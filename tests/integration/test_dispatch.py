"""``dispatch()`` against the embedded default: a real SQLite board, a real bare origin, local workers
under the portable supervisor, and the stand-in agent (``python -m fleet.agents.demo``).

Seed 003's pre-flight: every refusal returns its own exit code (D20) and writes nothing to the
board, except check 3, which comments exactly once. A launch runs the real runner to a merged PR.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.control.switches import write_halt_file
from fleet.core.exits import Exit
from fleet.core.markers import Kind, history
from fleet.core.model import Capacity, CapacitySource, CIState
from fleet.dispatch import dispatch
from fleet.runner.capacity import capacity_path, write_capacity
from tests.integration.fleet_fixture import (
    POLL_S,
    RUN_DEADLINE_S,
    Fleet,
    all_comments,
    has_marker,
    kinds,
    refuses,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


# -- kill switches -------------------------------------------------------------------------------


def test_halt_file_refuses_with_its_reason(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work", "body")
    write_halt_file(Path(fleet.inventory.halt.file), "migrating the forge", author="ops")
    line = refuses(fleet, n, Exit.HALTED_FILE, 0, worker="w1")
    assert "migrating the forge" in line
    assert "ops" in line


def test_halt_issue_refuses(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work", "body")
    fleet.board.create_issue("HALT FLEET", "bad deploy, hold everything")
    line = refuses(fleet, n, Exit.HALTED_ISSUE, 0, worker="w1")
    assert "bad deploy" in line


# -- checks 1, 2, 3, 5, 7 ------------------------------------------------------------------------


def test_missing_issue_refuses(fleet: Fleet) -> None:
    refuses(fleet, 999, Exit.ISSUE_MISSING, 1, worker="w1")


def test_closed_issue_refuses_silently(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work", "body")
    fleet.board.close(n)  # type: ignore[attr-defined]
    refuses(fleet, n, Exit.ISSUE_CLOSED, 2, worker="w1")


def test_do_not_dispatch_comments_exactly_once(fleet: Fleet) -> None:
    n = fleet.board.create_issue("[do-not-dispatch] spike notes", "body")
    for _ in range(2):
        r = dispatch(fleet.ctx, n, worker="w1")
        assert (r.outcome, r.code, r.check) == ("refused", Exit.DO_NOT_DISPATCH, 3)
    issue = fleet.board.issue(n)
    assert issue is not None
    assert kinds(issue) == [Kind.DO_NOT_DISPATCH]
    assert len(issue.comments) == 1


def test_do_not_dispatch_dry_run_writes_nothing(fleet: Fleet) -> None:
    n = fleet.board.create_issue("[do-not-dispatch] spike notes", "body")
    refuses(fleet, n, Exit.DO_NOT_DISPATCH, 3, worker="w1", dry_run=True)


def test_open_blocker_refuses_and_names_it(fleet: Fleet) -> None:
    blocker = fleet.board.create_issue("first", "body")
    n = fleet.board.create_issue("second", "body")
    fleet.board.add_blocker(n, blocker)  # type: ignore[attr-defined]
    line = refuses(fleet, n, Exit.BLOCKED, 5, worker="w1")
    assert f"#{blocker}" in line


def test_red_ci_is_advisory_the_run_starts_and_says_it_started_on_red(fleet: Fleet) -> None:
    # Seed 003 check 7: open and advisory. Before, a red main refused every dispatch (exit 28),
    # the issue that would fix CI included.
    n = fleet.board.create_issue("Fault: failed", "body", labels=["demo:crash"])
    fleet.board.set_ci(CIState.RED)  # type: ignore[attr-defined]
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    issue = wait_for(fleet.board, n, lambda i: len(kinds(i)) >= 2)
    start = next(m for m in history(issue, "fleet").markers if m.kind is Kind.START)
    assert start.get("baseline") == "red"
    h = history(issue, "fleet")
    assert kinds(issue)[-1] in (Kind.FAILED, Kind.TIMED_OUT), kinds(issue)
    assert (h.attempts, h.red_failures) == (0, 1)  # the failure may be the baseline's
    fleet.board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    m = fleet.board.create_issue("plain work", "body")
    assert dispatch(fleet.ctx, m, worker="w1").launched
    green = wait_for(fleet.board, m, has_marker(Kind.SUCCESS))
    assert (
        next(x for x in history(green, "fleet").markers if x.kind is Kind.START).get("baseline")
        == "green"
    )


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (CapacitySource.RATE_LIMIT, Exit.DARK_RATE_LIMIT),
        (CapacitySource.REVOKED, Exit.DARK_REVOKED),
    ],
)
def test_capacity_dark_worker_refuses_by_source(
    fleet: Fleet, source: CapacitySource, code: Exit
) -> None:
    n = fleet.board.create_issue("plain work", "body")
    now = datetime.now(UTC)
    reset = now + timedelta(hours=2) if source is CapacitySource.RATE_LIMIT else None
    w = fleet.inventory.worker("w1")
    assert w is not None
    write_capacity(
        capacity_path(Path(w.state_dir)), Capacity(source, reset, "limit reached", now, n)
    )
    line = refuses(fleet, n, code, 4, worker="w1")
    assert "w1" in line


def test_unknown_worker_refuses(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work", "body")
    line = refuses(fleet, n, Exit.NO_SUCH_WORKER, None, worker="nope")
    assert "'nope'" in line


def test_dry_run_launches_nothing(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work", "body")
    before = all_comments(fleet.board)
    r = dispatch(fleet.ctx, n, worker="w1", dry_run=True)
    assert (r.outcome, r.code, r.check, r.unit) == ("dry-run", Exit.OK, None, f"task-{n}")
    w = fleet.inventory.worker("w1")
    assert w is not None
    assert [u for u in fleet.ctx.supervisor(w).probe() if u.issue == n] == []
    time.sleep(0.5)  # a launched runner would have posted its start marker by now
    assert all_comments(fleet.board) == before


# -- a launch ------------------------------------------------------------------------------------


def test_launch_runs_to_a_merged_pr_and_success(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Add a greeting", "body")
    r = dispatch(fleet.ctx, n, worker="w1")
    assert (r.outcome, r.code, r.worker, r.unit) == ("launched", Exit.OK, "w1", f"task-{n}")
    assert r.timings["probe_to_live_s"] >= 0
    assert r.timings["lock_held_s"] >= r.timings["probe_to_live_s"] * 0.5
    issue = wait_for(fleet.board, n, lambda i: not i.is_open and has_marker(Kind.SUCCESS)(i))
    assert kinds(issue) == [Kind.START, Kind.SUCCESS]
    start = history(issue, "fleet").markers[0]
    assert start.get("run") == r.run_id
    prs = fleet.board.pull_requests_closing(n)  # type: ignore[attr-defined]
    assert any(pr.merged for pr in prs), prs


def test_second_dispatch_while_live_is_held(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    first = dispatch(fleet.ctx, n, worker="w1")
    try:
        assert first.launched, first.line()
        wait_for(fleet.board, n, has_marker(Kind.START))
        before = all_comments(fleet.board)
        second = dispatch(fleet.ctx, n, worker="w1")
        assert (second.outcome, second.code, second.check) == ("refused", Exit.HELD_LIVE, 10)
        assert all_comments(fleet.board) == before
    finally:
        fleet.stop("w1", n)


def test_a_failed_run_fires_the_on_failure_notifier(fleet: Fleet) -> None:
    # D3 property 4: a failing unit raises the OnFailure alarm; the notifier always exits 0.
    n = fleet.board.create_issue("Fault: crash", labels=["demo:crash"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    wait_for(fleet.board, n, has_marker(Kind.FAILED))
    w = fleet.inventory.worker("w1")
    assert w is not None
    result = Path(w.state_dir) / "units" / f"task-{n}.result.json"
    end = time.monotonic() + RUN_DEADLINE_S
    while not result.exists() and time.monotonic() < end:
        time.sleep(POLL_S)
    data = json.loads(result.read_text())
    assert data["exit_code"] != 0 and data["notifier"] == {"exit": 0}, data
