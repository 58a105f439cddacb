"""The Supervisor contract: the same tests over systemd ``--user`` and the portable supervisor.

Both run on the same harness worker, as the same master, over the same verified SSH connection, so
the only difference between the two columns is the supervisor: what check 10 (the name claim), the
probe under the fleet lock (check 6), ``repair``, ``reap`` and ``cancel`` rely on is the same
promise from both (D3, D4). The board's contract suite does the same for the two boards.

Each backend works on issue numbers of its own, so the two never see each other's units.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from fleet.board import open_board
from fleet.context import FleetContext
from fleet.core.model import Unit
from fleet.inventory import WorkerConfig, load
from fleet.units import ClaimCode, PortableSupervisor, Supervisor, SystemdSupervisor
from fleet.units.base import UnitStart

pytestmark = pytest.mark.timeout(300)

WORKER = "w1"  # a systemd master; the portable supervisor runs beside it as the same user
BACKENDS = {"systemd": 9100, "portable": 9200}  # each backend's own block of issue numbers
WAIT_S = 30.0  # every wait on the worker is bounded by this
STOP_S = 10.0


@dataclass
class Backend:
    name: str
    sup: Supervisor
    w: WorkerConfig
    ctx: FleetContext
    first_issue: int

    def issue(self, k: int) -> int:
        return self.first_issue + k

    def sh(self, command: str) -> str:
        res = self.ctx.transport(self.w).run(command, timeout=WAIT_S)
        assert res.ok, res.stderr
        return res.stdout

    def cat(self, path: str) -> str:
        """The file's text on the worker, empty while it does not exist."""
        return self.sh(f"cat {shlex.quote(path)} 2>/dev/null || true")

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", **extra}

    def live(self, issue: int) -> list[Unit]:
        return [u for u in self.sup.probe() if u.issue == issue and u.live]

    def wait(self, what: str, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_S
        while not check():
            assert time.monotonic() < deadline, f"{self.name}: timed out waiting for {what}"
            time.sleep(0.3)


@pytest.fixture(scope="module")
def fleet(harness_deploy: Callable[[str], Path]) -> Iterator[FleetContext]:
    inv = load(harness_deploy("supervisors"))
    with FleetContext(inv, open_board(inv)) as ctx:
        yield ctx


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, fleet: FleetContext) -> Iterator[Backend]:
    w = fleet.worker(WORKER)
    assert w is not None
    sup: Supervisor
    if request.param == "systemd":
        sup = fleet.supervisor(w)
        assert sup.kind == "systemd", f"{WORKER} is expected to be a systemd master, got {sup.kind}"
    else:
        sup = PortableSupervisor(
            fleet.transport(w),
            worker=w.name,
            master=w.master or "",
            state_dir=f"{w.state_dir}/contract-units",
            python=w.python,
        )
    b = Backend(request.param, sup, w, fleet, BACKENDS[request.param])
    yield b
    for k in range(11):  # whatever a test left running, stopped (only this backend's own numbers)
        b.sup.stop(b.issue(k), timeout_s=STOP_S)


def test_a_start_is_live_in_the_probe_with_its_monotonic_start(backend: Backend) -> None:
    n = backend.issue(1)
    claim = backend.sup.start(n, ["sleep", "60"], env=backend.env(), max_run_s=120)
    assert claim.code is ClaimCode.LAUNCHED, claim.detail
    assert claim.unit is not None
    (unit,) = backend.live(n)
    assert (unit.name, unit.worker, unit.master) == (f"task-{n}", backend.w.name, backend.w.master)
    assert unit.start_us > 0  # what oldest-wins repair orders by (D4)
    # A claim may leave the start unread (systemd's: the probe reads it); one that names it
    # names the probe's.
    assert claim.unit.start_us in (0, unit.start_us)


def test_a_second_start_of_a_live_name_is_held_live_and_names_the_holder(backend: Backend) -> None:
    n = backend.issue(2)
    marks = f"{backend.w.state_dir}/contract-{backend.name}-{n}.ran"
    backend.sh(f"rm -f {shlex.quote(marks)}")
    argv = ["sh", "-c", f"echo ran >> {shlex.quote(marks)}; sleep 60"]
    first = backend.sup.start(n, argv, env=backend.env(), max_run_s=120)
    second = backend.sup.start(n, argv, env=backend.env(), max_run_s=120)
    assert first.code is ClaimCode.LAUNCHED, first.detail
    assert second.code is ClaimCode.HELD_LIVE, second.detail
    assert second.unit is not None and first.unit is not None
    (holder,) = backend.live(n)
    assert second.unit.start_us == holder.start_us > 0  # the holder, not a second run
    backend.wait("the first run to write its mark", lambda: "ran" in backend.cat(marks))
    time.sleep(1.0)  # a second process, had one started, would have written by now
    assert backend.cat(marks).split() == ["ran"]  # one process ran
    assert len(backend.live(n)) == 1


def test_a_stop_takes_the_unit_and_frees_the_name(backend: Backend) -> None:
    n = backend.issue(3)
    assert backend.sup.start(n, ["sleep", "60"], env=backend.env(), max_run_s=120).launched
    res = backend.sup.stop(n, timeout_s=STOP_S)
    assert res.was_live and res.stopped, res.detail
    assert backend.live(n) == []
    again = backend.sup.start(n, ["sleep", "60"], env=backend.env(), max_run_s=120)
    assert again.code is ClaimCode.LAUNCHED, again.detail  # a stopped name is free at once


def test_a_stop_of_a_free_name_says_it_was_not_live(backend: Backend) -> None:
    res = backend.sup.stop(backend.issue(4), timeout_s=STOP_S)
    assert not res.was_live and res.stopped, res.detail


def test_the_unit_gets_only_its_own_environment(backend: Backend) -> None:
    """A supervised unit inherits nothing from the session that started it (D3): PATH and the
    variables it was given, and not the caller's own."""
    n = backend.issue(5)
    out = f"{backend.w.state_dir}/contract-{backend.name}-{n}.env"
    backend.sh(f"rm -f {shlex.quote(out)}")
    argv = ["sh", "-c", f"env > {shlex.quote(out)}.tmp && mv {shlex.quote(out)}.tmp {out}"]
    env = backend.env(FLEET_CONTRACT="given")
    assert backend.sup.start(n, argv, env=env, max_run_s=60).launched
    backend.wait("the unit to write its environment", lambda: "FLEET_CONTRACT" in backend.cat(out))
    seen = dict(line.split("=", 1) for line in backend.cat(out).splitlines() if "=" in line)
    assert seen["FLEET_CONTRACT"] == "given"
    assert seen["PATH"] == env["PATH"]
    assert "SSH_CONNECTION" not in seen  # the launching session's own variable did not leak


def test_the_maximum_run_time_ends_the_unit(backend: Backend) -> None:
    n = backend.issue(6)
    claim = backend.sup.start(n, ["sleep", "120"], env=backend.env(), max_run_s=2)
    assert claim.code is ClaimCode.LAUNCHED, claim.detail
    # Claims across the end of the run and the collection of its unit: each one says the name is
    # held (live, or by the finished run) or takes it — never a supervisor failure, which is what
    # a claim in the very instant systemd collects the unit read as when taken at its word.
    seen: list[ClaimCode] = []
    deadline = time.monotonic() + WAIT_S
    while not seen or seen[-1] is not ClaimCode.LAUNCHED:
        assert time.monotonic() < deadline, f"{backend.name}: the name never came free: {seen}"
        again = backend.sup.start(n, ["sleep", "60"], env=backend.env(), max_run_s=120)
        assert again.code is not ClaimCode.SUPERVISOR_FAILED, again.detail
        seen.append(again.code)
        time.sleep(0.05)
    assert seen[0] is ClaimCode.HELD_LIVE and len(backend.live(n)) == 1


def test_claims_of_one_master_in_one_call_each_answer_for_itself(backend: Backend) -> None:
    a, b, c = backend.issue(7), backend.issue(8), backend.issue(9)
    held = backend.sup.start(b, ["sleep", "60"], env=backend.env(), max_run_s=120)
    assert held.code is ClaimCode.LAUNCHED, held.detail
    (holder,) = backend.live(b)
    starts = [UnitStart(n, ("sleep", "60"), backend.env(), 120) for n in (a, b, c)]
    claims = backend.sup.start_many(starts)
    assert [x.code if x else None for x in claims] == [
        ClaimCode.LAUNCHED,
        ClaimCode.HELD_LIVE,
        ClaimCode.LAUNCHED,
    ], [x.detail if x else None for x in claims]
    assert [u.start_us for u in backend.live(b)] == [holder.start_us]  # no second run of b
    assert len(backend.live(a)) == len(backend.live(c)) == 1


ALARM_UNIT = "fleet-contract-alarm@.service"  # a stand-in OnFailure alarm that counts its firings


def counting(backend: Backend, log: str) -> Supervisor:
    """The backend's supervisor with an on-failure alarm that appends the unit's name to ``log``."""
    if backend.name == "systemd":
        text = f"[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo %i >> {log}'\n"
        backend.sh(
            'd="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"; mkdir -p "$d" && '
            f'printf %s {shlex.quote(text)} > "$d/{ALARM_UNIT}" && systemctl --user daemon-reload'
        )
        return SystemdSupervisor(
            backend.ctx.transport(backend.w),
            worker=backend.w.name,
            master=backend.w.master or "",
            notifier=ALARM_UNIT,
        )
    assert isinstance(backend.sup, PortableSupervisor)
    return PortableSupervisor(
        backend.ctx.transport(backend.w),
        worker=backend.w.name,
        master=backend.w.master or "",
        state_dir=backend.sup.state_dir,
        python=backend.w.python,
        notifier=f'echo "$FLEET_UNIT" >> {log}',
    )


def test_a_start_whose_command_cannot_be_executed_is_refused_once_and_alarms_once(
    backend: Backend,
) -> None:
    """A run whose working directory is gone (a removed worktree): nothing runs, the claim is a
    supervisor failure, the name is free again, and the on-failure alarm fires once. systemd-run
    leaves such a unit collected, as it does a name refused in the instant of its collection; a
    claim that took this for that and tried again would run the failed exec and alarm twice."""
    n = backend.issue(10)
    log = f"{backend.w.state_dir}/contract-alarms-{backend.name}"
    backend.sh(f"rm -f {shlex.quote(log)}")
    sup = counting(backend, log)
    claim = sup.start(
        n, ["sleep", "30"], env=backend.env(), max_run_s=60, cwd="/nonexistent/fleet-contract-dir"
    )
    # Not launched: a supervisor failure, or, when systemd's show still sees the failed unit before
    # its collection, a name held by a finished run (retried later); never a live unit.
    assert claim.code in (ClaimCode.SUPERVISOR_FAILED, ClaimCode.HELD_FINISHED), claim.detail
    backend.wait("the alarm", lambda: backend.cat(log).strip() != "")
    time.sleep(2.0)  # a second alarm, if one were coming, has had its time
    assert backend.cat(log).split() == [f"task-{n}"]
    assert backend.live(n) == []
