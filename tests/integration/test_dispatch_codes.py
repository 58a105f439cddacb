"""The refusal codes test_dispatch.py does not reach: pause and drain, the three answers of check 8
and their fleet-wide forms, check 9, and an unreadable board — each through the production
``dispatch()`` on a real board, real shells, a real (closed) SSH port and real git."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.model import CapacitySource
from fleet.dispatch import dispatch
from fleet.runner.capacity import Capacity, capacity_path, write_capacity
from tests.integration.fleet_fixture import (
    Fleet,
    make_fleet,
    only_ghost,
    refuses,
    set_worker,
    with_ghost,
)

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(("flag", "code"), [("PAUSE", Exit.PAUSED), ("DRAIN", Exit.DRAINING)])
def test_pause_and_drain_refuse_before_the_network(fleet: Fleet, flag: str, code: Exit) -> None:
    n = fleet.board.create_issue("plain work")
    state = Path(fleet.inventory.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    (state / flag).write_text("operator\n")
    refuses(fleet, n, code, 0, worker="w1")


def test_a_state_dir_the_master_cannot_create_is_no_permission(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work")
    w = fleet.inventory.worker("w1")
    assert w is not None
    Path(w.state_dir).parent.mkdir(parents=True, exist_ok=True)
    Path(w.state_dir).write_text("a file where the state directory should be")
    line = refuses(fleet, n, Exit.NO_PERMISSION, 8, worker="w1")
    assert "no-permission" in line


def test_a_worker_without_the_runner_is_no_runner(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, edit=set_worker("w1", python="/nonexistent/python3"))
    with f.ctx:
        n = f.board.create_issue("plain work")
        assert "no-runner" in refuses(f, n, Exit.NO_RUNNER, 8, worker="w1")


def test_a_closed_ssh_port_is_unreachable_and_claims_nothing(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, edit=with_ghost)
    with f.ctx:
        n = f.board.create_issue("plain work")
        refuses(f, n, Exit.UNREACHABLE, 8, worker="ghost")


def test_no_worker_reachable_is_its_own_code(tmp_path: Path) -> None:
    f = make_fleet(tmp_path, edit=only_ghost)
    with f.ctx:
        n = f.board.create_issue("plain work")
        refuses(f, n, Exit.NONE_REACHABLE, 8)


def test_every_worker_dark_is_its_own_code(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work")
    w = fleet.inventory.worker("w1")
    assert w is not None
    cap = Capacity(CapacitySource.RATE_LIMIT, None, "You've hit your limit")
    write_capacity(capacity_path(Path(w.state_dir)), cap)
    refuses(fleet, n, Exit.ALL_DARK, 4)


def test_a_clone_that_cannot_be_made_is_unsynced(fleet: Fleet) -> None:
    n = fleet.board.create_issue("plain work")
    w = fleet.inventory.worker("w1")
    assert w is not None
    Path(w.clone).parent.mkdir(parents=True, exist_ok=True)
    Path(w.clone).write_text("not a clone")
    line = refuses(fleet, n, Exit.CLONE_UNSYNCED, 9, worker="w1")
    assert "git clone failed" in line


def test_an_unreadable_board_fails_closed(fleet: Fleet) -> None:
    board_path = fleet.inventory.board.path
    assert board_path is not None
    fleet.board.disconnect()  # type: ignore[attr-defined]
    board_path.write_bytes(b"this is not an sqlite database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{board_path}{suffix}").unlink(missing_ok=True)
    board = LocalBoard(board_path, fleet.inventory.board.origin)
    with FleetContext(fleet.inventory, board) as ctx:
        r = dispatch(ctx, 1, worker="w1")
    assert (r.outcome, r.code) == ("refused", Exit.BOARD_UNREADABLE), r.line()
