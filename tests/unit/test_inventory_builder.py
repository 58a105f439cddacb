"""fleet.inventory_builder: what it builds is what fleet.inventory loads, field for field."""

from __future__ import annotations

from pathlib import Path

from fleet import inventory_builder as b
from fleet.core.model import SupervisorKind, TransportKind
from fleet.inventory import DEFAULT_LOCK_WAIT_S, load, loads


def test_the_embedded_layout_loads_with_every_given_value(tmp_path: Path) -> None:
    w1 = b.local_worker(tmp_path, "w1", python="/usr/bin/python3", supervisor="portable",
                        path_prefix=(), agent="python -m fleet.agents.demo --kind codex")  # fmt: skip
    data = b.under(tmp_path, [w1], lock_wait_s=0.5, policy={"max_run_s": 40},
                   trust={"allow": ["alice"]})  # fmt: skip
    inv = load(b.write(tmp_path / "inventory.yaml", data))
    assert (inv.board.kind, inv.board.identity) == ("local", "fleet")
    assert (inv.board.path, inv.board.origin) == (
        tmp_path / "board.sqlite3",
        tmp_path / "origin.git",
    )
    assert (inv.lock.path, inv.lock.wait_s, inv.lock.host) == (tmp_path / "fleet.lock", 0.5, None)
    assert (inv.halt.file, inv.halt.issue_title) == (tmp_path / "HALT", "HALT FLEET")
    assert inv.state_dir == tmp_path / "state"
    assert inv.policy.trust.allow == ("alice",)
    (w,) = inv.workers
    assert (w.name, w.transport, w.supervisor) == (
        "w1",
        TransportKind.LOCAL,
        SupervisorKind.PORTABLE,
    )
    assert (w.clone, w.state_dir) == (
        str(tmp_path / "workers/w1/clone"),
        str(tmp_path / "workers/w1"),
    )
    assert (w.path_prefix, w.max_run_s, w.agent_kind.value) == ((), 40, "codex")


def test_a_field_given_as_none_is_left_to_the_loaders_default(tmp_path: Path) -> None:
    ssh = b.worker("box1", transport="ssh", host="10.0.0.11", port=None, master="agent", key=None)
    assert "port" not in ssh and "key" not in ssh
    assert list(ssh)[:3] == ["name", "transport", "host"]  # the loader's key order
    data = b.inventory(board=b.local_board("board.sqlite3", "origin.git"), lock="fleet.lock",
                       halt="HALT", state_dir="state", workers=[ssh])  # fmt: skip
    assert data["lock"] == {"path": "fleet.lock"} and "policy" not in data and "trust" not in data
    inv = loads(b.dump(data, header="a comment\nover two lines"), str(tmp_path / "inv.yaml"))
    assert (inv.lock.wait_s, inv.workers[0].port, inv.workers[0].key) == (
        DEFAULT_LOCK_WAIT_S,
        22,
        None,
    )
    assert inv.board.identity == "fleet"  # the loader's default identity
    assert b.dump(data, header="a comment\nover two lines").startswith("# a comment\n# over two")
