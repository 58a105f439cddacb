"""Seed 001 §13 at the board: a refusal writes nothing (D6, seed 003's pre-flight).

Every refusal path of the production ``dispatch()`` runs against a real SQLite board, a real bare
origin, real local workers under the portable supervisor and a real (closed) SSH port, and the
board — every row of every table, dumped by SQLite itself, plus every ref in the origin — is
compared byte for byte before and after. The one designed exception is check 3 (a do-not-dispatch
title): it comments exactly once, and a second refusal then writes nothing more.

Setup comes from fleet_fixture.py; test_dispatch.py and test_dispatch_codes.py drive the same codes
for their exit values; this file asks the other question about each: did the board move?
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.control.switches import write_halt_file
from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.core.model import CapacitySource
from fleet.dispatch import dispatch
from fleet.lock import FleetLock
from fleet.runner.capacity import Capacity, capacity_path, write_capacity
from tests.integration.fleet_fixture import (
    Edit,
    Fleet,
    has_marker,
    kinds,
    make_fleet,
    only_ghost,
    set_worker,
    wait_for,
    with_ghost,
)

pytestmark = pytest.mark.timeout(120)

DEADLINE_S = 15.0  # bound on waiting for a unit to reach a state (a wedged one fails the test)


def board_bytes(f: Fleet) -> bytes:
    """The whole board as bytes: SQLite's own dump of every table, then the origin's refs."""
    path = f.inventory.board.path
    assert path is not None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    origin = f.inventory.board.origin
    refs = subprocess.run(
        ["git", "-C", str(origin), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    return dump.encode() + b"\n--refs--\n" + refs


def _worker_dir(f: Fleet, name: str = "w1") -> Path:
    w = f.inventory.worker(name)
    assert w is not None
    return Path(w.state_dir)


def _wait(cond: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.1)


# -- the refusal table: arrange(fleet) -> (issue, dispatch keywords) -------------------------------

Arrange = Callable[[Fleet], tuple[int, dict[str, object]]]


def _plain(f: Fleet) -> int:
    return f.board.create_issue("plain work", "body")


def _halt_file(f: Fleet) -> tuple[int, dict[str, object]]:
    n = _plain(f)
    write_halt_file(Path(f.inventory.halt.file), "forge migration", author="ops")
    return n, {"worker": "w1"}


def _halt_issue(f: Fleet) -> tuple[int, dict[str, object]]:
    n = _plain(f)
    f.board.create_issue("HALT FLEET", "bad deploy")
    return n, {"worker": "w1"}


def _flag(name: str) -> Arrange:
    def arrange(f: Fleet) -> tuple[int, dict[str, object]]:
        n = _plain(f)
        state = Path(f.inventory.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        (state / name).write_text("operator\n")
        return n, {"worker": "w1"}

    return arrange


def _closed(f: Fleet) -> tuple[int, dict[str, object]]:
    n = _plain(f)
    f.board.close(n)  # type: ignore[attr-defined]
    return n, {"worker": "w1"}


def _blocked(f: Fleet) -> tuple[int, dict[str, object]]:
    first, n = _plain(f), _plain(f)
    f.board.add_blocker(n, first)  # type: ignore[attr-defined]
    return n, {"worker": "w1"}


def _dark(source: CapacitySource, **kw: object) -> Arrange:
    def arrange(f: Fleet) -> tuple[int, dict[str, object]]:
        n = _plain(f)
        now = datetime.now(UTC)
        reset = now + timedelta(hours=2) if source is CapacitySource.RATE_LIMIT else None
        cap = Capacity(source, reset, "limit reached", now, n)
        write_capacity(capacity_path(_worker_dir(f)), cap)
        return n, dict(kw)

    return arrange


def _no_permission(f: Fleet) -> tuple[int, dict[str, object]]:
    n = _plain(f)
    d = _worker_dir(f)
    d.parent.mkdir(parents=True, exist_ok=True)
    d.write_text("a file where the state directory should be")
    return n, {"worker": "w1"}


def _unsynced(f: Fleet) -> tuple[int, dict[str, object]]:
    n = _plain(f)
    w = f.inventory.worker("w1")
    assert w is not None
    Path(w.clone).parent.mkdir(parents=True, exist_ok=True)
    Path(w.clone).write_text("not a clone")
    return n, {"worker": "w1"}


@dataclass(frozen=True)
class Case:
    code: Exit
    arrange: Arrange
    edit: Edit | None = None  # the inventory, edited before it is loaded


def _on(worker: str | None = "w1") -> Arrange:
    def arrange(f: Fleet) -> tuple[int, dict[str, object]]:
        return _plain(f), {} if worker is None else {"worker": worker}

    return arrange


CASES = {
    "halt-file": Case(Exit.HALTED_FILE, _halt_file),
    "halt-issue": Case(Exit.HALTED_ISSUE, _halt_issue),
    "paused": Case(Exit.PAUSED, _flag("PAUSE")),
    "draining": Case(Exit.DRAINING, _flag("DRAIN")),
    "1-missing": Case(Exit.ISSUE_MISSING, lambda f: (999, {"worker": "w1"})),
    "2-closed": Case(Exit.ISSUE_CLOSED, _closed),
    "5-blocked": Case(Exit.BLOCKED, _blocked),
    "no-such-worker": Case(Exit.NO_SUCH_WORKER, _on("nope")),
    "4-rate-limit": Case(Exit.DARK_RATE_LIMIT, _dark(CapacitySource.RATE_LIMIT, worker="w1")),
    "4-revoked": Case(Exit.DARK_REVOKED, _dark(CapacitySource.REVOKED, worker="w1")),
    "4-all-dark": Case(Exit.ALL_DARK, _dark(CapacitySource.RATE_LIMIT)),
    "8-unreachable": Case(Exit.UNREACHABLE, _on("ghost"), with_ghost),
    "8-none-reachable": Case(Exit.NONE_REACHABLE, _on(None), only_ghost),
    "8-no-permission": Case(Exit.NO_PERMISSION, _no_permission),
    "8-no-runner": Case(Exit.NO_RUNNER, _on("w1"), set_worker("w1", python="/nonexistent/python3")),
    "9-unsynced": Case(Exit.CLONE_UNSYNCED, _unsynced),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_refusal_writes_nothing(tmp_path: Path, case: Case) -> None:
    f = make_fleet(tmp_path, edit=case.edit)
    with f.ctx:
        n, kw = case.arrange(f)
        before = board_bytes(f)
        r = dispatch(f.ctx, n, **kw)  # type: ignore[arg-type]
        assert (r.outcome, r.code) == ("refused", case.code), r.line()
        assert board_bytes(f) == before, f"{case.code.name} wrote to the board"


def test_a_lock_timeout_writes_nothing(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, lock_wait_s=0.3)
    with f.ctx:
        assert f.inventory.lock.wait_s == 0.3
        n = _plain(f)
        before = board_bytes(f)
        with FleetLock(Path(f.inventory.lock.path), wait_s=1) as other:  # another dispatcher
            assert other.report.acquired
            r = dispatch(f.ctx, n, worker="w1")
        assert (r.outcome, r.code) == ("refused", Exit.LOCK_TIMEOUT), r.line()
        assert board_bytes(f) == before


def test_an_unreadable_board_is_left_as_it_was(tmp_path: Path) -> None:
    f = make_fleet(tmp_path)
    path = f.inventory.board.path
    assert path is not None
    f.ctx.close()
    garbage = b"this is not an sqlite database" * 100
    path.write_bytes(garbage)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with FleetContext(f.inventory, LocalBoard(path, f.inventory.board.origin)) as ctx:
        r = dispatch(ctx, 1, worker="w1")
    assert (r.outcome, r.code) == ("refused", Exit.BOARD_UNREADABLE), r.line()
    assert path.read_bytes() == garbage


# -- refusals under the lock, with a real unit holding the name ------------------------------------


def test_check_10_held_live_writes_nothing(tmp_path: Path) -> None:
    f = make_fleet(tmp_path)
    with f.ctx:
        n = f.board.create_issue("Fault: hang", labels=["demo:hang"])
        first = dispatch(f.ctx, n, worker="w1")
        try:
            assert first.launched, first.line()
            wait_for(f.board, n, has_marker(Kind.START))
            before = board_bytes(f)
            r = dispatch(f.ctx, n, worker="w1")
            assert (r.outcome, r.code) == ("refused", Exit.HELD_LIVE), r.line()
            assert board_bytes(f) == before
        finally:
            f.stop("w1", n)


def test_check_6_live_on_another_worker_writes_nothing(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, ("w1", "w2"))
    with f.ctx:
        n = f.board.create_issue("Fault: hang", labels=["demo:hang"])
        first = dispatch(f.ctx, n, worker="w1")
        try:
            assert first.launched, first.line()
            wait_for(f.board, n, has_marker(Kind.START))
            before = board_bytes(f)
            r = dispatch(f.ctx, n, worker="w2")
            assert (r.outcome, r.code, r.check) == ("refused", Exit.HELD_OTHER_WORKER, 6)
            assert board_bytes(f) == before
        finally:
            f.stop("w1", n)


@pytest.mark.slow
def test_check_10_held_by_a_finished_unit_writes_nothing(tmp_path: Path) -> None:
    """The unit's main process exited but a leftover ignores SIGTERM: the name is held by a
    finished unit still unloading (the portable supervisor's kill grace keeps it deactivating)."""
    f = make_fleet(tmp_path)
    with f.ctx:
        n = _plain(f)
        w = f.inventory.worker("w1")
        assert w is not None
        sup = f.ctx.supervisor(w)
        argv = ["bash", "-c", "(trap '' TERM; exec sleep 300) & sleep 0.2; exit 0"]
        assert sup.start(n, argv, env={"PATH": "/usr/bin:/bin"}, max_run_s=60).launched
        try:
            _wait(lambda: [u.state for u in sup.probe()] == ["deactivating"], "deactivating")
            before = board_bytes(f)
            r = dispatch(f.ctx, n, worker="w1")
            assert (r.outcome, r.code) == ("refused", Exit.HELD_FINISHED), r.line()
            assert board_bytes(f) == before
        finally:
            sup.stop(n, timeout_s=1)  # the leftover ignores TERM: the stop ends in a kill


# -- check 3: the one refusal that comments, and only once -----------------------------------------


def test_check_3_comments_exactly_once_and_then_writes_nothing(tmp_path: Path) -> None:
    f = make_fleet(tmp_path)
    with f.ctx:
        n = f.board.create_issue("[do-not-dispatch] spike notes", "body")
        untouched = board_bytes(f)
        dry = dispatch(f.ctx, n, worker="w1", dry_run=True)
        assert (dry.outcome, dry.code) == ("refused", Exit.DO_NOT_DISPATCH)
        assert board_bytes(f) == untouched, "a dry run wrote the notice"

        first = dispatch(f.ctx, n, worker="w1")
        assert (first.outcome, first.code, first.check) == ("refused", Exit.DO_NOT_DISPATCH, 3)
        issue = f.board.issue(n)
        assert issue is not None
        assert kinds(issue) == [Kind.DO_NOT_DISPATCH] and len(issue.comments) == 1
        after_notice = board_bytes(f)
        assert after_notice != untouched

        for _ in range(2):
            again = dispatch(f.ctx, n, worker="w1")
            assert (again.outcome, again.code) == ("refused", Exit.DO_NOT_DISPATCH)
            assert board_bytes(f) == after_notice, "check 3 commented twice"
