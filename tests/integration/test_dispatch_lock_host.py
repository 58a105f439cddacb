"""The fleet lock on a lock host (D4 across machines): ``lock.host`` makes dispatch hold an flock
on that host for the probe and the launch. The lock host's transport here is a real local shell
(``LocalTransport``) standing in for SSH — the same ``open_stream`` a ``SSHTransport`` gives,
exercised over a real sshd in test_transport_ssh.py."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from fleet import inventory_builder
from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.exits import Exit
from fleet.core.model import CIState
from fleet.dispatch import dispatch, fleet_lock
from fleet.inventory import WorkerConfig, load
from fleet.inventory_builder import InventoryData
from fleet.lock import RemoteFleetLock
from fleet.transport import LocalTransport, Transport
from tests.integration.fleet_fixture import write_fleet_inventory


def _on_a_lock_host(data: InventoryData, root: Path) -> None:
    """The fleet lock on ``lockhost``: an ssh worker whose transport the test makes a local one."""
    data["lock"]["host"] = "lockhost"
    data["workers"].append(
        inventory_builder.worker(
            "lockhost",
            transport="ssh",
            host="127.0.0.1",
            master="root",
            python=sys.executable,
            path_prefix=[],
            state_dir=root / "lockhost",
            clone=root / "lockhost" / "clone",
        )
    )


def _ctx(tmp_path: Path) -> FleetContext:
    root = tmp_path.resolve()
    path = write_fleet_inventory(root, ("w1",), lock_wait_s=0.5, edit=_on_a_lock_host)
    inv = load(path)
    board = open_board(inv, create=True)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]

    def local(w: WorkerConfig) -> Transport:
        return LocalTransport(w.name)

    return FleetContext(inv, board, stderr=io.StringIO(), transport_factory=local)


def test_a_lock_host_makes_dispatch_hold_the_remote_flock(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    with ctx:
        assert isinstance(fleet_lock(ctx), RemoteFleetLock)
        n = ctx.board.create_issue("Fault: hang", labels=["demo:hang"])
        opener = LocalTransport("other-dispatcher")
        other = RemoteFleetLock(opener, str(ctx.inventory.lock.path), wait_s=5)
        with other:  # another machine's dispatcher is between its probe and its launch
            assert other.report.acquired
            r = dispatch(ctx, n, worker="w1")
        assert (r.outcome, r.code, r.check) == ("refused", Exit.LOCK_TIMEOUT, 10), r.line()
        launched = dispatch(ctx, n, worker="w1")
        try:
            assert launched.launched, launched.line()
            assert launched.timings["lock_held_s"] > 0
        finally:
            w = ctx.worker("w1")
            assert w is not None
            ctx.supervisor(w).stop(n, timeout_s=10)
