"""Smoke tests of the four-worker harness: the parts the fault and race tests stand on.

Each check is one property the seeds depend on: a master's ``systemd-run --user`` is a real,
named, supervised unit (D3) whose name is refused while it lives (D4's second layer), two masters
on one box are two name spaces (D4's table), a worker has no way out (network rules), the shared
volume is the same path on both sides, and the image's Python has fleet's dependencies.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from fleet import inventory
from fleet.testing import harness
from fleet.testing.harness import Endpoint, HarnessInfo

pytestmark = pytest.mark.docker

UNIT = "task-1"  # a unit name as the dispatcher builds it: task-<issue>, zero entropy (D4)
SLEEP_S = 30  # outlives every check below; the unit is stopped at the end of each test anyway


ENDPOINT_NAMES = ["w1", "w2", "w3", "w4-alpha", "w4-beta"]


@pytest.fixture(scope="session")
def clients(harness_info: HarnessInfo) -> Iterator[dict[str, paramiko.SSHClient]]:
    """One verified connection per master, reused by every test (a login costs ~100 ms)."""
    opened = {ep.name: harness.connect(harness_info, ep) for ep in harness_info.endpoints()}
    yield opened
    for client in opened.values():
        client.close()


def _start(client: paramiko.SSHClient, unit: str = UNIT) -> tuple[int, str, str]:
    return harness.run(
        client, f"systemd-run --user --unit={unit} --collect -p Type=exec sleep {SLEEP_S}"
    )


def _stop(client: paramiko.SSHClient, unit: str = UNIT) -> None:
    harness.run(client, f"systemctl --user stop {unit}; systemctl --user reset-failed {unit}")


def test_endpoints_match_the_inventory_names(harness_info: HarnessInfo) -> None:
    assert [ep.name for ep in harness_info.endpoints()] == ENDPOINT_NAMES
    assert {c.name for c in harness_info.containers} == {"w1", "w2", "w3", "w4"}
    assert len({c.port for c in harness_info.containers}) == 4


def test_an_unknown_host_key_is_rejected(harness_info: HarnessInfo, tmp_path: Path) -> None:
    """The known_hosts is what makes a connection trusted: an empty one refuses every worker."""
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    stranger = HarnessInfo(harness_info.image, harness_info.shared_dir, harness_info.key, empty,
                           harness_info.containers)  # fmt: skip
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        harness.connect(stranger, stranger.endpoints()[0])


@pytest.mark.parametrize("name", ENDPOINT_NAMES)
def test_a_named_user_unit_runs_and_its_name_is_refused_while_it_lives(
    clients: dict[str, paramiko.SSHClient], name: str
) -> None:
    client = clients[name]
    _stop(client)
    try:
        rc, _, err = _start(client)
        assert rc == 0, err
        rc, out, err = harness.run(
            client,
            f"systemctl --user show {UNIT} -p ActiveState -p ExecMainStartTimestampMonotonic",
        )
        assert rc == 0, err
        shown = dict(line.split("=", 1) for line in out.splitlines())
        assert shown["ActiveState"] == "active"
        # µs on CLOCK_MONOTONIC: what oldest-wins repair orders by (D4)
        assert int(shown["ExecMainStartTimestampMonotonic"]) > 0

        rc, _, err = _start(client)
        assert rc == 1
        assert "already loaded or has a fragment file" in err
    finally:
        _stop(client)


def test_the_same_unit_name_under_the_other_master_is_another_name(
    clients: dict[str, paramiko.SSHClient],
) -> None:
    """D4: a user supervisor is per user; w4's two masters both get task-1."""
    alpha, beta = clients["w4-alpha"], clients["w4-beta"]
    _stop(alpha)
    _stop(beta)
    try:
        assert _start(alpha)[0] == 0
        rc, _, err = _start(beta)
        assert rc == 0, err
        for client in (alpha, beta):
            assert harness.run(client, f"systemctl --user is-active {UNIT}")[1].strip() == "active"
    finally:
        _stop(alpha)
        _stop(beta)


def test_a_master_of_w4_only_cannot_log_in_elsewhere(harness_info: HarnessInfo) -> None:
    w1 = next(c for c in harness_info.containers if c.name == "w1")
    with pytest.raises(paramiko.AuthenticationException):
        harness.connect(harness_info, Endpoint("w1-beta", w1, "beta"))


@pytest.mark.parametrize("name", ["w1", "w2", "w3", "w4-alpha"])
def test_a_worker_has_no_default_route(clients: dict[str, paramiko.SSHClient], name: str) -> None:
    rc, out, err = harness.run(clients[name], "ip -4 route; ip -6 route; cat /etc/resolv.conf")
    assert rc == 0, err
    assert "default" not in out
    assert "nameserver 127.0.0.1" in out


def test_the_shared_volume_is_the_same_path_on_both_sides(
    harness_info: HarnessInfo, clients: dict[str, paramiko.SSHClient]
) -> None:
    """The board and the origin live on the host; a worker must read and write them in place."""
    shared = harness_info.shared_dir
    (shared / "from-host").write_text("host\n")
    for name, client in clients.items():
        target = shared / f"from-{name}"
        rc, out, err = harness.run(
            client, f"cat {shared}/from-host && echo {name} > {target} && stat -c %g {target}"
        )
        assert rc == 0, err
        assert out.split() == ["host", str(harness.FLEET_GID)]
        assert target.read_text() == f"{name}\n"
    # Files written by one master stay writable by the others (group + default ACL).
    rc, _, err = harness.run(clients["w2"], f"echo again >> {shared}/from-w1")
    assert rc == 0, err
    assert os.stat(shared / "from-w1").st_gid == harness.FLEET_GID


def test_the_image_python_has_the_runtime_dependencies(
    clients: dict[str, paramiko.SSHClient],
) -> None:
    rc, out, err = harness.run(
        clients["w3"],
        f"{harness.VENV_PYTHON} -c 'import fabric, invoke, portalocker, ruamel.yaml, yaml, httpx, rich;"
        " import sys; print(sys.version_info[:2])'",
    )
    assert rc == 0, err
    assert out.strip() == "(3, 11)"


def test_the_generated_inventory_loads_with_the_real_ports(
    harness_info: HarnessInfo, tmp_path: Path
) -> None:
    """One inventory worker per (container, master), lane = container, validated by the loader."""
    board_dir = harness_info.shared_dir / "board"
    path = harness.write_inventory(harness_info, tmp_path / "inventory.yaml", board_dir=board_dir)
    inv = inventory.load(path)
    ports = {c.name: c.port for c in harness_info.containers}
    assert [w.name for w in inv.workers] == ENDPOINT_NAMES
    for w, ep in zip(inv.workers, harness_info.endpoints(), strict=True):
        assert (w.transport, w.host, w.port) == ("ssh", "127.0.0.1", ports[w.lane])
        assert (w.lane, w.master) == (ep.container.name, ep.master)
        assert w.known_hosts == str(harness_info.known_hosts)
        assert w.supervisor == "systemd"
    assert inv.board.path == board_dir.resolve() / "board.sqlite3"
    with pytest.raises(harness.HarnessError, match="not inside the shared directory"):
        harness.write_inventory(harness_info, tmp_path / "bad.yaml", board_dir=tmp_path)
