"""The folded probe: once a command knows a worker's supervisor, check 8, the PATH, the capacity file
and the unit list come back in ONE round trip, and they say what the two round trips said.

Real shells, a real local worker under the real portable supervisor with a live unit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.context import FleetContext
from fleet.core.markers import Kind
from fleet.core.model import Reach, SupervisorKind
from fleet.dispatch import dispatch
from fleet.inventory import WorkerConfig, loads
from fleet.observe import (
    probe_command,
    probe_fleet,
    probe_worker,
    split_probe,
    split_units,
)
from fleet.transport import LocalTransport, RunResult, parse_reach, transport_for
from fleet.units import detect_command
from tests.integration.fleet_fixture import Fleet, has_marker, wait_for

pytestmark = pytest.mark.timeout(120)


def _worker(state_dir: Path) -> WorkerConfig:
    inv = loads(
        f"workers:\n  - name: w\n    transport: local\n    python: {sys.executable}\n"
        f"    state_dir: {state_dir}\n"
    )
    return inv.workers[0]


def _sh(command: str, home: Path) -> RunResult:
    res = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )
    return RunResult(res.returncode, res.stdout, res.stderr)


def test_a_folded_unit_probe_that_exits_ends_only_itself(tmp_path: Path) -> None:
    """A supervisor's probe may ``exit`` (systemd's does): the capacity part must still run."""
    w = _worker(tmp_path / "state")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "capacity.json").write_text('{"source": "revoked"}')
    units = "echo 'unit line one'; echo '{\"units\": []}'; exit 3"
    res = _sh(probe_command(w, units=units), tmp_path)
    assert res.exit == 0
    assert parse_reach(res)[0] is Reach.OK
    head, path, cap = split_probe(res.stdout)
    assert path.startswith("/usr/bin") and cap == '{"source": "revoked"}'
    got = split_units(head, res.stderr)
    assert got.exit == 3
    assert got.stdout.splitlines()[:2] == ["unit line one", '{"units": []}']


def test_missing_unit_marks_read_as_a_failed_probe() -> None:
    assert split_units("fleet-reach:ok\nfleet-path:/bin\n").exit == -1
    assert split_units("fleet-units:\nhalf an answer\n").exit == -1


class _Counting:
    """A transport that counts the commands it runs (the round trips)."""

    def __init__(self, inner: LocalTransport) -> None:
        self.inner, self.worker, self.commands = inner, inner.worker, 0
        self.sent: list[str] = []

    def run(self, command, *, timeout=None, env=None):  # type: ignore[no-untyped-def]
        self.commands += 1
        self.sent.append(command)
        return self.inner.run(command, timeout=timeout, env=env)

    def close(self) -> None:
        self.inner.close()


def test_the_second_probe_is_one_round_trip_and_says_the_same(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Fault: hang", labels=["demo:hang"])
    r = dispatch(fleet.ctx, n, worker="w1")
    try:
        assert r.launched, r.line()
        wait_for(fleet.board, n, has_marker(Kind.START))
        counting: dict[str, _Counting] = {}

        def factory(w: WorkerConfig) -> _Counting:
            counting[w.name] = _Counting(transport_for(w))  # type: ignore[arg-type]
            return counting[w.name]

        with FleetContext(fleet.inventory, fleet.board, transport_factory=factory) as ctx:  # type: ignore[arg-type]
            w = fleet.inventory.workers[0]
            first, _ = probe_worker(ctx, w)
            before = counting["w1"].commands
            second, _ = probe_worker(ctx, w)
            assert counting["w1"].commands - before == 1
            (units_only,) = probe_fleet(ctx, units_only=True)
            assert counting["w1"].commands - before == 2
        assert (units_only.reach, units_only.units) == (Reach.OK, second.units)
        assert first.reach is second.reach is Reach.OK
        assert [(u.issue, u.live) for u in second.units] == [(n, True)]
        assert first.units == second.units and first.path == second.path
    finally:
        fleet.stop("w1", n)


def _counting_python(where: Path, name: str, *, runner: bool = True) -> Path:
    """An interpreter that notes each start in ``<name>.starts``; without ``runner`` it cannot
    import the runner (exit 1), as a worker whose fleet is not installed."""
    script = where / name
    starts = where / f"{name}.starts"
    body = f'exec {sys.executable} "$@"' if runner else "exit 1"
    script.write_text(f"#!/bin/sh\necho start >> {starts}\n{body}\n")
    script.chmod(0o755)
    return script


def _starts(python: Path) -> int:
    starts = python.with_name(python.name + ".starts")
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def _local_fleet(tmp_path: Path, pythons: list[Path], state_dirs: list[Path] | None = None):  # type: ignore[no-untyped-def]
    dirs = state_dirs or [tmp_path / f"w{i}" for i in range(len(pythons))]
    workers = "".join(
        f"  - {{name: w{i}, transport: local, supervisor: portable, path_prefix: [],"
        f" python: '{py}', state_dir: '{d}'}}\n"
        for i, (py, d) in enumerate(zip(pythons, dirs, strict=True))
    )
    return loads(f"workers:\n{workers}", str(tmp_path / "inventory.yaml"))


def test_local_workers_of_one_interpreter_ask_the_runner_test_once(tmp_path: Path) -> None:
    """Check 8's runner test is one question for local workers with one interpreter and PATH:
    asked once per probe of the fleet, its answer — yes or no — is every such worker's."""
    ok, broken, other = (
        _counting_python(tmp_path, "py-ok"),
        _counting_python(tmp_path, "py-broken", runner=False),
        _counting_python(tmp_path, "py-other"),
    )
    with FleetContext(_local_fleet(tmp_path, [ok, ok, ok]), None) as ctx:  # type: ignore[arg-type]
        views = probe_fleet(ctx)
    assert [v.reach for v in views] == [Reach.OK] * 3 and _starts(ok) == 1
    with FleetContext(_local_fleet(tmp_path, [broken, broken]), None) as ctx:  # type: ignore[arg-type]
        views = probe_fleet(ctx)
    assert [v.reach for v in views] == [Reach.NO_RUNNER] * 2 and _starts(broken) == 1
    with FleetContext(_local_fleet(tmp_path, [ok, other, ok]), None) as ctx:  # type: ignore[arg-type]
        views = probe_fleet(ctx)
    assert [v.reach for v in views] == [Reach.OK] * 3
    assert (_starts(ok), _starts(other)) == (2, 1)


def test_a_first_worker_that_never_ran_the_runner_test_answers_for_nobody(tmp_path: Path) -> None:
    """The first worker's state directory cannot be made, so its probe stops before the runner
    test: the others ask it themselves."""
    py = _counting_python(tmp_path, "py")
    (tmp_path / "a-file").write_text("")
    dirs = [tmp_path / "a-file" / "state", tmp_path / "w1", tmp_path / "w2"]
    with FleetContext(_local_fleet(tmp_path, [py, py, py], dirs), None) as ctx:  # type: ignore[arg-type]
        views = probe_fleet(ctx)
    assert [v.reach for v in views] == [Reach.NO_PERMISSION, Reach.OK, Reach.OK]
    assert _starts(py) == 2


def test_an_auto_worker_is_detected_inside_its_first_probe(tmp_path: Path) -> None:
    """``supervisor: auto`` asks whether systemd answers in the reach round trip, and chooses
    what a detection of its own would have chosen."""
    state = tmp_path / "w"
    inv = loads(
        f"workers:\n  - {{name: w, transport: local, supervisor: auto, path_prefix: [],"
        f" python: '{sys.executable}', state_dir: '{state}'}}\n"
    )
    counting: dict[str, _Counting] = {}

    def factory(w: WorkerConfig) -> _Counting:
        counting[w.name] = _Counting(transport_for(w))  # type: ignore[arg-type]
        return counting[w.name]

    with FleetContext(inv, None, transport_factory=factory) as ctx:  # type: ignore[arg-type]
        view, _ = probe_worker(ctx, inv.workers[0])
        chosen = ctx.known_supervisor("w")
    assert view.reach is Reach.OK and chosen is not None
    systemd = transport_for(inv.workers[0]).run(detect_command()).ok
    assert chosen.kind is (SupervisorKind.SYSTEMD if systemd else SupervisorKind.PORTABLE)
    assert detect_command() in counting["w"].sent[0]
    assert all(detect_command() not in c for c in counting["w"].sent[1:])
