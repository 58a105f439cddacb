"""The portable supervisor with real processes: the guarantees of D3 and D4 without systemd.

Every test drives the production :class:`PortableSupervisor` through a real shell (``bash -c``), the
same command line an SSH transport would send, against a temporary state directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import fleet
from fleet.transport import LocalTransport, RunResult, TransportError
from fleet.units import ClaimCode, PortableSupervisor, choose_supervisor
from fleet.units import __main__ as units_main
from fleet.units.portable import build_start_command

ROOT = str(Path(fleet.__file__).resolve().parents[1])
UNIT_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

pytestmark = pytest.mark.timeout(60)


class ShellTransport:
    """A real local shell (not a fake): ``bash -c command`` with fleet importable."""

    worker = "local"

    def __init__(self, extra_env: Mapping[str, str] | None = None) -> None:
        self.env = {**os.environ, "PYTHONPATH": ROOT, **(extra_env or {})}

    def run(
        self, command: str, *, timeout: float | None = None, env: Mapping[str, str] | None = None
    ) -> RunResult:
        try:
            proc = subprocess.run(
                ["bash", "-c", command],
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**self.env, **(env or {})},
            )
        except subprocess.TimeoutExpired as exc:
            raise TransportError(f"timed out after {timeout}s: {command[:80]}") from exc
        return RunResult(proc.returncode, proc.stdout, proc.stderr)

    def close(self) -> None:
        return None


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` every 50 ms, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (absent, or a zombie awaiting its parent)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def read_pid(path: Path) -> int:
    assert wait_for(lambda: path.exists() and path.read_text().strip() != "", 5)
    return int(path.read_text().strip())


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "units"
    yield directory
    # Leave no process behind: stop every name a test left held.
    sup = PortableSupervisor(
        ShellTransport(),
        worker="local",
        master="me",
        state_dir=str(directory),
        python=sys.executable,
    )
    for unit in sup.probe():
        sup.stop(unit.issue, timeout_s=1)


def make(state_dir: Path, **kw: object) -> PortableSupervisor:
    return PortableSupervisor(
        ShellTransport(),
        worker="local",
        master="me",
        state_dir=str(state_dir),
        python=sys.executable,
        **kw,  # type: ignore[arg-type]
    )


def result_of(state_dir: Path, issue: int) -> dict:
    return json.loads((state_dir / f"task-{issue}.result.json").read_text())


def test_start_then_probe_shows_it_active_with_its_monotonic_start(state_dir: Path) -> None:
    sup = make(state_dir)
    before = time.monotonic_ns() // 1000
    claim = sup.start(1, ["sleep", "30"], env=UNIT_ENV, max_run_s=60)
    after = time.monotonic_ns() // 1000
    assert claim.code is ClaimCode.LAUNCHED, claim.detail
    assert claim.unit is not None and before <= claim.unit.start_us <= after
    (unit,) = sup.probe()
    assert (unit.issue, unit.state, unit.worker, unit.master) == (1, "active", "local", "me")
    assert unit.start_us == claim.unit.start_us
    assert unit.started_at is not None and unit.live


def test_second_start_of_a_live_name_is_held_live_and_only_one_process_ran(
    state_dir: Path, tmp_path: Path
) -> None:
    sup = make(state_dir)
    ran = tmp_path / "ran"
    argv = ["bash", "-c", f"echo x >> {ran}; sleep 30"]
    first = sup.start(2, argv, env=UNIT_ENV, max_run_s=60)
    second = sup.start(2, argv, env=UNIT_ENV, max_run_s=60)
    assert first.code is ClaimCode.LAUNCHED
    assert second.code is ClaimCode.HELD_LIVE, second.detail
    assert second.unit is not None and first.unit is not None
    assert second.unit.start_us == first.unit.start_us  # the holder, not a new run
    time.sleep(0.3)
    assert ran.read_text() == "x\n"


@pytest.mark.slow
def test_eight_racing_starts_of_one_name_launch_exactly_once(
    state_dir: Path, tmp_path: Path
) -> None:
    sup = make(state_dir)
    ran = tmp_path / "ran"
    argv = ["bash", "-c", f"echo x >> {ran}; sleep 30"]
    barrier = threading.Barrier(8)

    def claim(_: int) -> ClaimCode:
        barrier.wait(timeout=10)
        return sup.start(3, argv, env=UNIT_ENV, max_run_s=60).code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(claim, range(8)))
    assert codes.count(ClaimCode.LAUNCHED) == 1, codes
    assert codes.count(ClaimCode.HELD_LIVE) == 7, codes
    time.sleep(0.3)
    assert ran.read_text() == "x\n"


def test_unit_survives_its_launcher_session_being_killed(state_dir: Path, tmp_path: Path) -> None:
    """The dispatcher's SSH session ending (SIGHUP then SIGKILL to its whole session) leaves the
    unit running (D3 property 1)."""
    mark = tmp_path / "main.pid"
    command = build_start_command(
        python=sys.executable,
        state_dir=str(state_dir),
        issue=4,
        argv=["bash", "-c", f"echo $$ > {mark}; sleep 30"],
        env=UNIT_ENV,
        max_run_s=60,
    )
    launcher = subprocess.Popen(
        ["bash", "-c", f"{command}; sleep 30"],
        stdout=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        text=True,
    )
    assert launcher.stdout is not None
    assert json.loads(launcher.stdout.readline())["code"] == "launched"
    os.killpg(launcher.pid, signal.SIGHUP)
    os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=5)
    main_pid = read_pid(mark)
    time.sleep(0.3)
    assert not gone(main_pid)
    assert [u.issue for u in make(state_dir).probe()] == [4]


def test_start_returns_at_once_although_the_unit_keeps_running(state_dir: Path) -> None:
    """The supervisor holds none of the caller's stdio, or an SSH command would never return."""
    began = time.monotonic()
    claim = make(state_dir).start(5, ["sleep", "30"], env=UNIT_ENV, max_run_s=60)
    assert claim.code is ClaimCode.LAUNCHED
    assert time.monotonic() - began < 5


def test_stop_takes_the_whole_tree_including_a_setsid_grandchild(
    state_dir: Path, tmp_path: Path
) -> None:
    sup = make(state_dir)
    main_f, grand_f = tmp_path / "main.pid", tmp_path / "grand.pid"
    script = f"setsid bash -c 'echo $$ > {grand_f}; exec sleep 300' & echo $$ > {main_f}; sleep 300"
    assert sup.start(6, ["bash", "-c", script], env=UNIT_ENV, max_run_s=60).launched
    main_pid, grand_pid = read_pid(main_f), read_pid(grand_f)
    assert wait_for(lambda: os.getsid(grand_pid) == grand_pid, 5)  # truly detached: own session
    assert os.getsid(grand_pid) != os.getsid(main_pid)

    outcome = sup.stop(6, timeout_s=2)

    assert outcome.was_live and outcome.stopped, outcome.detail
    assert wait_for(lambda: gone(main_pid) and gone(grand_pid), 3)
    assert sup.probe() == ()
    assert result_of(state_dir, 6)["result"] == "stopped"


def test_stop_of_a_free_name_says_it_was_not_live(state_dir: Path) -> None:
    outcome = make(state_dir).stop(99, timeout_s=1)
    assert (outcome.was_live, outcome.stopped) == (False, True)


def test_sigkill_of_the_supervisor_frees_the_name_at_once(state_dir: Path) -> None:
    sup = make(state_dir)
    assert sup.start(7, ["sleep", "300"], env=UNIT_ENV, max_run_s=60).launched
    stale = json.loads((state_dir / "task-7.json").read_text())
    os.kill(stale["supervisor_pid"], signal.SIGKILL)
    assert wait_for(lambda: gone(stale["supervisor_pid"]), 5)
    assert sup.probe() == ()  # the stale state file is ignored: the lock is the truth
    assert (state_dir / "task-7.json").exists()
    again = sup.start(7, ["sleep", "300"], env=UNIT_ENV, max_run_s=60)
    assert again.code is ClaimCode.LAUNCHED, again.detail
    fresh = json.loads((state_dir / "task-7.json").read_text())
    assert fresh["supervisor_pid"] != stale["supervisor_pid"]
    # The crashed run's main process does not run on beside the new one (parent-death signal).
    assert wait_for(lambda: gone(stale["pid"]), 5)


def test_the_supervising_process_loads_only_the_standard_library_and_its_own_modules() -> None:
    """A local claim waits on the supervisor's start-up (issue 13, goal 2): started the way a claim
    starts it (its flags, fleet from PACKAGE_ROOT alone), it imports none of the dispatcher side
    (board, dispatch, transport, the model's value types) and nothing from site-packages."""
    code = "import sys, fleet.units.supervise; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, *units_main.SUPERVISOR_FLAGS, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": units_main.PACKAGE_ROOT},
    )
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert {m for m in loaded if m.split(".")[0] == "fleet"} == {
        "fleet", "fleet.core", "fleet.core.names", "fleet.units", "fleet.units.procs",
        "fleet.units.record", "fleet.units.state", "fleet.units.supervise",
    }  # fmt: skip
    top = {m.split(".")[0] for m in loaded} - {"__main__"}  # the -c script itself
    foreign = top - set(sys.stdlib_module_names) - {"fleet"}
    assert foreign == set(), foreign  # httpx, fabric, invoke and every .pth hook stay out
    assert "site" not in loaded and "argparse" not in loaded


def test_max_run_time_ends_the_unit_with_the_named_result_timeout(state_dir: Path) -> None:
    sup = make(state_dir)
    began = time.monotonic()
    assert sup.start(8, ["sleep", "300"], env=UNIT_ENV, max_run_s=1).launched
    assert wait_for(lambda: sup.probe() == (), 8)
    assert time.monotonic() - began < 10  # 1 s limit + grace; generous for a loaded CI box
    outcome = result_of(state_dir, 8)
    assert outcome["result"] == "timeout"
    assert outcome["signal"] == signal.SIGTERM
    assert outcome["end_us"] - outcome["start_us"] >= 1_000_000


@pytest.mark.slow
def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(state_dir: Path) -> None:
    sup = make(state_dir, kill_grace_s=0.5)
    argv = ["bash", "-c", "trap '' TERM; sleep 300"]
    assert sup.start(9, argv, env=UNIT_ENV, max_run_s=1).launched
    assert wait_for(lambda: sup.probe() == (), 10)
    outcome = result_of(state_dir, 9)
    assert (outcome["result"], outcome["signal"]) == ("timeout", signal.SIGKILL)


def test_nonzero_exit_runs_the_notifier_whose_own_failure_is_ignored(
    state_dir: Path, tmp_path: Path
) -> None:
    said = tmp_path / "said"
    notifier = f'echo "$FLEET_UNIT $FLEET_RESULT $FLEET_EXIT_CODE" > {said}; exit 7'
    sup = make(state_dir, notifier=notifier)
    assert sup.start(10, ["bash", "-c", "exit 3"], env=UNIT_ENV, max_run_s=60).launched
    assert wait_for(lambda: sup.probe() == (), 10)
    assert said.read_text() == "task-10 exited 3\n"
    outcome = result_of(state_dir, 10)
    assert (outcome["exit_code"], outcome["notifier"]) == (3, {"exit": 7})


def test_clean_exit_runs_no_notifier_and_the_unit_is_collected(
    state_dir: Path, tmp_path: Path
) -> None:
    said = tmp_path / "said"
    sup = make(state_dir, notifier=f"touch {said}")
    assert sup.start(11, ["true"], env=UNIT_ENV, max_run_s=60).launched
    assert wait_for(lambda: sup.probe() == (), 10)
    assert not said.exists()
    assert not (state_dir / "task-11.json").exists()
    assert (result_of(state_dir, 11)["result"], result_of(state_dir, 11)["exit_code"]) == (
        "exited",
        0,
    )


@pytest.mark.slow
def test_a_finished_run_still_killing_leftovers_is_held_finished(state_dir: Path) -> None:
    """Main exited, a leftover ignores SIGTERM: the name is held by a finished run (check 10)."""
    sup = make(state_dir, kill_grace_s=5)  # long enough for a probe and a start on a busy box
    argv = ["bash", "-c", "(trap '' TERM; exec sleep 300) & sleep 0.2; exit 0"]
    assert sup.start(12, argv, env=UNIT_ENV, max_run_s=60).launched
    assert wait_for(lambda: [u.state for u in sup.probe()] == ["deactivating"], 5)
    held = sup.start(12, ["true"], env=UNIT_ENV, max_run_s=60)
    assert held.code is ClaimCode.HELD_FINISHED, held.detail
    assert held.unit is not None and held.unit.state == "deactivating"
    assert wait_for(lambda: sup.probe() == (), 15)
    assert sup.start(12, ["true"], env=UNIT_ENV, max_run_s=60).code is ClaimCode.LAUNCHED


def test_exec_failure_is_a_supervisor_failure_and_frees_the_name(state_dir: Path) -> None:
    sup = make(state_dir)
    failed = sup.start(13, ["/nonexistent/agent"], env=UNIT_ENV, max_run_s=60)
    assert failed.code is ClaimCode.SUPERVISOR_FAILED and "nonexistent" in failed.detail
    assert sup.probe() == ()
    assert sup.start(13, ["sleep", "5"], env=UNIT_ENV, max_run_s=60).launched


@pytest.mark.slow  # it waits out the alarm, ~3.5 s
def test_a_failed_start_answers_at_once_and_its_alarm_fires_once_afterwards(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose working directory is gone: the claim (in the dispatcher's own process, under
    the fleet lock) answers a supervisor failure without waiting for the on-failure alarm, which
    then fires once, as systemd's OnFailure= does for such a start."""
    monkeypatch.setattr(units_main, "HANDSHAKE_TIMEOUT_S", 2.0)  # the alarm outlasts it
    said = tmp_path / "said"
    notifier = f'sleep 3; echo "$FLEET_UNIT $FLEET_RESULT" >> {said}'
    sup = PortableSupervisor(
        LocalTransport("local"), worker="local", master="me", state_dir=str(state_dir),
        python=sys.executable, notifier=notifier,
    )  # fmt: skip
    began = time.monotonic()
    failed = sup.start(14, ["true"], env=UNIT_ENV, max_run_s=60, cwd=str(tmp_path / "gone"))
    assert failed.code is ClaimCode.SUPERVISOR_FAILED, failed.detail
    assert time.monotonic() - began < 2.0  # the claim did not wait for the alarm
    assert sup.probe() == ()
    # While the alarm still runs, the name is free: the next claim of the issue launches.
    again = sup.start(14, ["sleep", "30"], env=UNIT_ENV, max_run_s=60)
    assert again.launched and not said.exists(), again.detail
    assert wait_for(lambda: said.exists(), 10)
    time.sleep(0.5)
    assert said.read_text() == "task-14 exec-failed\n"  # once, and only for the failed start
    assert sup.stop(14, timeout_s=1).stopped


def test_unit_gets_only_its_own_environment(state_dir: Path, tmp_path: Path) -> None:
    """Like a systemd user unit, it does not inherit the caller's variables (D3)."""
    out = tmp_path / "env"
    sup = PortableSupervisor(
        ShellTransport({"CALLER_ONLY": "leak"}),
        worker="local",
        master="me",
        state_dir=str(state_dir),
        python=sys.executable,
    )
    argv = ["bash", "-c", f'echo "${{CALLER_ONLY:-none}}|$GIVEN" > {out}']
    assert sup.start(14, argv, env={**UNIT_ENV, "GIVEN": "a b 'c'"}, max_run_s=60).launched
    assert wait_for(lambda: out.exists() and out.read_text() != "", 5)
    assert out.read_text() == "none|a b 'c'\n"


def test_probes_never_cause_a_false_collision(state_dir: Path) -> None:
    """A probe tests for holders without taking any lock, so starts racing it always launch."""
    sup = make(state_dir)
    stop = threading.Event()

    def hammer() -> int:
        count = 0
        while not stop.is_set() and count < 500:
            sup.probe()
            count += 1
        return count

    with ThreadPoolExecutor(max_workers=1) as pool:
        probes = pool.submit(hammer)
        codes = [sup.start(n, ["true"], env=UNIT_ENV, max_run_s=60).code for n in range(20, 23)]
        stop.set()
        assert probes.result() > 0
    assert codes == [ClaimCode.LAUNCHED] * 3


def test_choose_supervisor_picks_portable_without_a_user_manager(state_dir: Path) -> None:
    transport = ShellTransport()
    kw = {"worker": "local", "master": "me", "state_dir": str(state_dir), "python": sys.executable}
    if transport.run("systemctl --user show-environment").ok:
        pytest.skip("this machine has a systemd user manager")
    assert choose_supervisor(transport, **kw).kind == "portable"
    assert choose_supervisor(transport, kind="systemd", **kw).kind == "systemd"
    with pytest.raises(ValueError, match="kind"):
        choose_supervisor(transport, kind="tmux", **kw)
