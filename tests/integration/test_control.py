"""The operator's switches and cancel, through the production CLI (``fleet …`` in a real process) on a
real SQLite board, a real local worker under the portable supervisor and the stand-in agent:

* a halt file — with a reason, or empty — and a halt issue stop ``schedule --apply`` before ANY
  board write (the whole database is dumped before and after); ``resume`` removes the file;
* ``cancel`` ends a hanging demo agent AND its children (seen gone in /proc), posts the cancelled
  marker last, and select never dispatches the issue again — decided even while halted and paused;
* ``pause`` and ``drain`` refuse dispatch; the idle report is right while a unit is live and after
  it ends (seed 001 §13).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet.core.exits import Exit
from fleet.core.markers import Kind, history
from fleet.core.model import WaitState
from fleet.core.select import select
from fleet.dispatch import dispatch
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.units import procs
from tests.integration.fleet_fixture import (
    Fleet,
    all_comments,
    fleet_cli,
    has_marker,
    kinds,
    make_fleet,
    refuses,
    wait_for,
    with_ghost,
)

pytestmark = pytest.mark.timeout(180)

TREE_DEADLINE_S = 20.0  # the hang agent forks its sleep child within a second of the start marker
POLL_S = 0.1


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = make_fleet(tmp_path)
    try:
        yield f
    finally:
        _stop_all(f)
        f.ctx.close()


def _stop_all(f: Fleet) -> None:
    """Teardown: no unit this test started outlives it."""
    for w in f.inventory.workers:
        if w.transport != "local":
            continue
        sup = f.ctx.supervisor(w)
        for u in sup.probe():
            if u.live:
                sup.stop(u.issue, timeout_s=5.0)


def board_dump(f: Fleet) -> list[str]:
    """Every row of the board database, as SQL: any write at all changes it."""
    path = f.inventory.board.path
    assert path is not None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return list(db.iterdump())


def _proc(pid: int) -> tuple[str, str] | None:
    """(start time, state) of a process from /proc, or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19], fields[0]  # starttime (field 22), state (field 3)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def unit_tree(f: Fleet, issue: int) -> dict[int, str]:
    """The unit's supervisor and every descendant, once the hang agent's sleep child exists:
    pid -> start time, so a reused pid is never mistaken for a survivor."""
    w = f.inventory.worker("w1")
    assert w is not None
    lock = f"{w.state_dir}/units/task-{issue}.lock"
    end = time.monotonic() + TREE_DEADLINE_S
    while time.monotonic() < end:
        holder = procs.lock_holder(lock)
        if holder and holder > 0:
            tree = {holder, *procs.descendants(holder)}
            if any(_comm(p) == "sleep" for p in tree):
                found = {p: _proc(p) for p in tree}
                return {p: s[0] for p, s in found.items() if s is not None}
        time.sleep(POLL_S)
    raise AssertionError(f"task-{issue}: no hang agent with a sleep child after {TREE_DEADLINE_S}s")


def survivors(tree: dict[int, str]) -> list[int]:
    alive = []
    for pid, started in tree.items():
        now = _proc(pid)
        if now is not None and now[0] == started and now[1] not in ("Z", "X"):
            alive.append(pid)
    return alive


def last_marker(f: Fleet, n: int):  # type: ignore[no-untyped-def]
    issue = f.board.issue(n)
    assert issue is not None
    return history(issue, "fleet").last_marker


# -- kill switches ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_halt_with_a_reason_stops_schedule_apply_before_any_board_write(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Add a greeting")
    r = fleet_cli(fleet, "halt", "--reason", "forge migration", "--author", "ops")
    assert r.returncode == 0, r.stderr
    assert "halted: halt file" in r.stdout and "set by ops" in r.stdout
    before = board_dump(fleet)
    r = fleet_cli(fleet, "schedule", "--apply")
    assert r.returncode == 0, r.stderr
    assert "HALTED" in r.stdout and "forge migration" in r.stdout and "by ops" in r.stdout
    assert board_dump(fleet) == before, "a halted sweep wrote to the board"
    assert not [u for u in fleet.ctx.supervisor(fleet.inventory.workers[0]).probe() if u.live]
    status = fleet_cli(fleet, "fleet-status")
    assert "halt file   ON — halted by file" in status.stdout and "forge migration" in status.stdout
    assert "outcome halted" in status.stdout  # the sweep's heartbeat, written on the halt path

    r = fleet_cli(fleet, "resume")
    assert r.returncode == 0 and "resumed: removed halt file" in r.stdout
    assert "forge migration" in r.stdout
    r = fleet_cli(fleet, "resume")
    assert r.returncode == 0 and "no halt file" in r.stdout and "nothing to remove" in r.stdout
    r = fleet_cli(fleet, "schedule", "--apply")
    assert r.returncode == 0, r.stderr
    wait_for(fleet.board, n, has_marker(Kind.SUCCESS))  # resumed: the work runs


def test_halt_refuses_an_empty_reason(fleet: Fleet) -> None:
    r = fleet_cli(fleet, "halt", "--reason", "  ")
    assert r.returncode == Exit.USAGE and "needs --reason" in r.stderr
    assert not Path(fleet.inventory.halt.file).exists()


def _empty_halt_file(f: Fleet) -> str:
    Path(f.inventory.halt.file).write_text("")
    return "no reason was recorded"


def _halt_issue(f: Fleet) -> str:
    n = f.board.create_issue("HALT FLEET", "bad deploy, hold everything")
    return f"halted by issue #{n}"


@pytest.mark.parametrize("switch", [_empty_halt_file, _halt_issue], ids=["empty-file", "issue"])
def test_every_halt_stops_schedule_apply_before_any_board_write(fleet: Fleet, switch) -> None:  # type: ignore[no-untyped-def]
    fleet.board.create_issue("Add a greeting")
    fleet.board.create_issue("[do-not-dispatch] notes")  # check 3 would comment: it must not
    words = switch(fleet)
    before = board_dump(fleet)
    r = fleet_cli(fleet, "schedule", "--apply")
    assert r.returncode == 0, r.stderr
    assert words in r.stdout and "HALTED" in r.stdout
    assert board_dump(fleet) == before, "a halted sweep wrote to the board"
    status = fleet_cli(fleet, "fleet-status", "--json")
    assert status.returncode == 0, status.stderr
    j = json.loads(status.stdout.strip().splitlines()[-1])
    assert any(words in line for line in j["halts"])
    assert {row["state"] for row in j["items"]} >= {"halted"}


# -- cancel ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cancel_ends_a_hanging_agent_and_its_children_even_while_halted_and_paused(
    fleet: Fleet,
) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    r = dispatch(fleet.ctx, n, worker="w1")
    assert r.launched, r.line()
    wait_for(fleet.board, n, has_marker(Kind.START))
    tree = unit_tree(fleet, n)
    assert len(tree) >= 4, tree  # supervisor, runner, agent (via sh), sleep
    assert fleet_cli(fleet, "halt", "--reason", "incident").returncode == 0
    assert fleet_cli(fleet, "pause", "--reason", "hold").returncode == 0

    r = fleet_cli(fleet, "cancel", "--issue", str(n), "--reason", "wrong spec", "--author", "ops")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"stopped task-{n} on w1:" in r.stdout and "cancelled marker posted" in r.stdout
    assert survivors(tree) == [], f"still alive after cancel: {survivors(tree)} of {tree}"

    issue = fleet.board.issue(n)
    assert issue is not None
    assert kinds(issue) == [Kind.START, Kind.STOPPED, Kind.CANCELLED]  # the cancel is LAST
    last = history(issue, "fleet").last_marker
    assert last is not None and last.kind is Kind.CANCELLED
    assert last.get("by") == "ops" and last.get("stopped") == "w1"
    assert "wrong spec" in last.note

    assert fleet_cli(fleet, "resume").returncode == 0
    assert fleet_cli(fleet, "unpause").returncode == 0
    plan = select(snapshot(fleet.ctx))
    held = plan.reason_for(n)
    assert held is not None and held.state == WaitState.LATCHED and "cancelled" in held.reason
    report = tick(fleet.ctx, apply=True)
    assert n not in [res.issue for res in report.results]
    assert kinds(fleet.board.issue(n)) == [Kind.START, Kind.STOPPED, Kind.CANCELLED]  # type: ignore[arg-type]


def test_cancel_with_no_live_unit_still_posts_and_says_so(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work")
    r = fleet_cli(fleet, "cancel", "--issue", str(n), "--json")
    assert r.returncode == 0, r.stderr
    assert "no live unit anywhere" in r.stdout and "cancelled marker posted" in r.stdout
    assert json.loads(r.stdout.strip().splitlines()[-1])["posted"] is True
    last = last_marker(fleet, n)
    assert last is not None and last.kind is Kind.CANCELLED
    comments = all_comments(fleet.board)

    again = fleet_cli(fleet, "cancel", "--issue", str(n))
    assert again.returncode == 0 and "already cancelled" in again.stdout
    assert all_comments(fleet.board) == comments
    assert select(snapshot(fleet.ctx)).dispatch == ()


def test_cancel_of_a_missing_issue_is_its_own_code(fleet: Fleet) -> None:
    r = fleet_cli(fleet, "cancel", "--issue", "999")
    assert r.returncode == Exit.ISSUE_MISSING and "does not exist" in r.stdout


def test_cancel_names_a_worker_it_could_not_check(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, edit=with_ghost)
    try:
        n = f.board.create_issue("plain work")
        r = fleet_cli(f, "cancel", "--issue", str(n))
        assert r.returncode == Exit.CANCEL_UNCHECKED, r.stdout + r.stderr
        assert "could not check worker ghost" in r.stdout
        assert "no live unit on any reachable worker" in r.stdout
        last = last_marker(f, n)
        assert last is not None and last.kind is Kind.CANCELLED and last.get("unchecked") == "ghost"
    finally:
        f.ctx.close()


# -- pause and drain -------------------------------------------------------------------------------
@pytest.mark.slow
def test_pause_refuses_dispatch_until_unpaused(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work")
    r = fleet_cli(fleet, "pause", "--reason", "vendor outage", "--author", "ops")
    assert r.returncode == 0 and "only cancels are decided" in r.stdout
    refuses(fleet, n, Exit.PAUSED, 0, worker="w1")
    before = board_dump(fleet)
    assert fleet_cli(fleet, "schedule", "--apply").returncode == 0
    assert board_dump(fleet) == before, "a paused sweep wrote to the board"
    status = fleet_cli(fleet, "fleet-status").stdout
    assert "PAUSE       ON — set by ops" in status and "but PAUSE is on" in status
    r = fleet_cli(fleet, "unpause")
    assert r.returncode == 0 and "removed: PAUSE" in r.stdout
    assert dispatch(fleet.ctx, n, worker="w1").launched
    wait_for(fleet.board, n, has_marker(Kind.SUCCESS))


@pytest.mark.slow
def test_drain_refuses_new_work_and_reports_idle_only_once_the_run_ends(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", "body", labels=["demo:hang"])
    assert dispatch(fleet.ctx, n, worker="w1").launched
    wait_for(fleet.board, n, has_marker(Kind.START))

    r = fleet_cli(fleet, "drain", "--reason", "release day", "--json")
    assert r.returncode == 0, r.stderr
    assert f"not idle: live task-{n} on w1 (active)" in r.stdout and f"in flight #{n}" in r.stdout
    verdict = json.loads(r.stdout.strip().splitlines()[-1])
    assert verdict["idle"] is False and [u["issue"] for u in verdict["live"]] == [n]

    r = fleet_cli(fleet, "drain", "--wait", "1", "--poll", "0.5")
    assert r.returncode == Exit.NOT_IDLE, r.stdout + r.stderr
    assert "gave up after 1s" in r.stderr
    # progress while it waits, on stderr: what is still out, one line per change (not per poll)
    waiting = [ln for ln in r.stderr.splitlines() if ln.startswith("drain: waiting up to 1s")]
    assert len(waiting) == 1 and f"not idle: live task-{n} on w1" in waiting[0]

    m = fleet.board.create_issue("new work")
    refuses(fleet, m, Exit.DRAINING, 0, worker="w1")
    status = fleet_cli(fleet, "fleet-status").stdout
    assert "DRAIN       ON" in status and "running on w1 since" in status

    fleet.stop("w1", n)  # the in-flight run ends (its runner posts its stopped marker)
    r = fleet_cli(fleet, "drain", "--wait", "20", "--poll", "0.5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "idle: no unit is live, nothing is parked or in flight" in r.stdout

    r = fleet_cli(fleet, "undrain")
    assert r.returncode == 0 and "removed: DRAIN" in r.stdout
    assert fleet_cli(fleet, "undrain").stdout.startswith("DRAIN was not set")
