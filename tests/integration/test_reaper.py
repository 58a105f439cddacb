"""The reaper on a real board, a real local worker and the real portable supervisor (D14, D20).

A runner killed with SIGKILL cannot close out: its start stays the last word. The reaper resets it
only once the probe shows no unit — while the unit is live it does not, however old the start —
and a worker that cannot be probed blocks every reap (could-not-check, never "no unit").
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.markers import Kind, history, render
from fleet.core.reap import ReapState
from fleet.core.select import select
from fleet.dispatch import dispatch
from fleet.inventory import load
from fleet.observe import snapshot
from fleet.roles.reaper import ReapReport, reap
from fleet.trace import read_trace
from fleet.trace.replay import replay_file
from tests.integration.fleet_fixture import (
    Fleet,
    all_comments,
    has_marker,
    kinds,
    make_fleet,
    wait_for,
    with_ghost,
    write_fleet_inventory,
)

pytestmark = pytest.mark.timeout(120)

UNIT_END_DEADLINE_S = 30.0  # SIGKILLed runner -> the supervisor kills the rest of the tree
POLL_S = 0.2


def late(f: Fleet) -> FleetContext:
    """The same fleet, read by a clock past the reaper threshold: only the probe protects a run."""
    skew = timedelta(seconds=f.inventory.policy.reaper_threshold_s + 60)
    return FleetContext(f.inventory, f.board, clock=lambda: datetime.now(UTC) + skew)


def decision(report: ReapReport, n: int):  # type: ignore[no-untyped-def]
    (d,) = [d for d in report.decisions if d.issue == n]
    return d


def runner_pid(f: Fleet, n: int) -> int:
    """The unit's main process — the runner — from the portable supervisor's state file."""
    w = f.inventory.worker("w1")
    assert w is not None
    record = json.loads((Path(w.state_dir) / "units" / f"task-{n}.json").read_text())
    pid = int(record["pid"])
    assert b"fleet.runner" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return pid


def test_a_sigkilled_runner_is_reaped_only_after_the_probe_shows_no_unit(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    wait_for(fleet.board, n, has_marker(Kind.START))
    with late(fleet) as old:
        # live: however old the start reads, the probe holds it
        report = reap(old, apply=True)
        assert decision(report, n).state == ReapState.LIVE and report.reaped == []
        assert kinds(fleet.board.issue(n)) == [Kind.START]  # type: ignore[arg-type]

        os.kill(runner_pid(fleet, n), signal.SIGKILL)  # no close-out is possible

        # with the real clock: live until the supervisor has taken the tree, then too young
        end = time.monotonic() + UNIT_END_DEADLINE_S
        while (d := decision(reap(fleet.ctx, apply=True), n)).state == ReapState.LIVE:
            assert time.monotonic() < end, "the unit did not end after its runner was killed"
            time.sleep(POLL_S)
        assert d.state == ReapState.TOO_YOUNG and "blinked" in d.why
        assert kinds(fleet.board.issue(n)) == [Kind.START]  # type: ignore[arg-type]

        before = all_comments(fleet.board)
        dry = reap(old, apply=False)
        assert (dry.outcome, decision(dry, n).state) == ("dry-run", ReapState.REAP)
        assert all_comments(fleet.board) == before  # a dry run writes nothing

        report = reap(old, apply=True)
        assert (report.outcome, report.exit, report.reaped) == ("reaped", Exit.OK, [n])
        again = reap(old, apply=True)  # the reaped marker is the last word now: nothing to do
        assert (again.outcome, again.decisions) == ("nothing", ())

    w = fleet.inventory.worker("w1")
    assert w is not None
    assert [u for u in fleet.ctx.supervisor(w).probe() if u.issue == n and u.live] == []
    issue = fleet.board.issue(n)
    assert issue is not None
    assert kinds(issue) == [Kind.START, Kind.REAPED]
    h = history(issue, "fleet")
    assert h.attempts == 1  # the reaped run spent its attempt
    assert [d.issue for d in select(snapshot(fleet.ctx)).dispatch] == [n]  # eligible again

    # the trace: the reap was decided on a probe that showed no live unit for the issue
    trace = read_trace(Path(fleet.inventory.state_dir) / "trace.jsonl")
    reaps = [e for e in trace if e["event"] == "REAP" and e["apply"]]
    decided = [e for e in reaps if any(d["reap"] for d in e["decisions"])]
    assert len(decided) == 1
    units = [u for w in decided[0]["snapshot"]["workers"] for u in w["units"] if u["issue"] == n]
    assert units == []
    assert any(e["event"] == "LAND" and e.get("loop") == "reaper" and e["ok"] for e in trace)
    # and every recorded reap decision replays from its recorded snapshot (seed 001 §9)
    replayed = replay_file(Path(fleet.inventory.state_dir) / "trace.jsonl")
    assert replayed.replayed and not replayed.differing, replayed.lines()


def test_an_unreachable_worker_blocks_only_the_reaps_of_its_own_starts(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, edit=with_ghost)  # w1 healthy, ghost: an ssh worker on a closed port
    with f.ctx:
        mine = f.board.create_issue("orphaned on w1")
        f.board.comment(mine, render(Kind.START, {"run": "r1", "worker": "w1", "master": "agent"}))
        n = f.board.create_issue("orphaned on the ghost")
        start = {"run": "r0", "worker": "ghost", "master": "agent", "unit": f"task-{n}"}
        f.board.comment(n, render(Kind.START, start))  # runs that died without a close-out
        with late(f) as old:
            report = reap(old, apply=True)
        # w1 answered without task-<mine>: reaped, whatever the ghost does
        assert report.reaped == [mine], report.to_json()
        assert kinds(f.board.issue(mine)) == [Kind.START, Kind.REAPED]  # type: ignore[arg-type]
        d = decision(report, n)
        assert (d.reap, d.state) == (False, ReapState.COULD_NOT_CHECK)
        assert "ghost" in d.why
        assert [u.split(" ")[0] for u in report.unchecked] == ["ghost"]
        assert kinds(f.board.issue(n)) == [Kind.START]  # type: ignore[arg-type]

    # the same board, the ghost gone from the inventory: a start naming a worker this fleet does
    # not probe is still could-not-check (it may run there); nothing else is left to reap
    inv = load(write_fleet_inventory(f.root))
    with FleetContext(inv, open_board(inv)) as ctx:
        skew = timedelta(seconds=inv.policy.reaper_threshold_s + 60)
        ctx.clock = lambda: datetime.now(UTC) + skew
        report = reap(ctx, apply=True)
    assert report.reaped == []
    assert "does not probe" in decision(report, n).why
