"""The portable supervisor's supervising process: the one that holds ``task-N`` for the unit's life.

``start`` (``__main__.start_answer``) spawns it detached, in a new session, as
``python -S -m fleet.units.supervise --dir DIR --handshake-fd N`` with the unit's spec on stdin.
It takes the name's record lock, launches the unit's main process, answers one handshake line
(``launched`` once the lock is held and the exec happened, else why not), then watches the unit
until it ends, a stop is asked for or its run time limit is reached, kills what is left of the
tree and records why it ended (D3, D4).

It is started once per claim and its start-up is the claim's latency (issue 13), so it imports
only the standard library and its own small modules (``state``, ``procs``, ``record``,
``fleet.core.names``) and parses its two options without argparse.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from fleet.core.names import unit_name
from fleet.units import procs
from fleet.units.record import UnitRecord
from fleet.units.state import Paths, describe_holder, now_iso, read_json, write_json

# SIGTERM-to-SIGKILL grace when the run time limit is reached or the main process leaves children
# behind; the same default as a stop (Supervisor.stop timeout_s), long enough for the runner's
# EXIT trap to post its terminal marker (D5).
DEFAULT_KILL_GRACE_S = 20.0
# Bounds the on-failure notifier: its result is ignored, and a hung notifier must not keep the
# name held (the unit would look "held-finished" forever).
NOTIFIER_TIMEOUT_S = 30.0
# The longest the supervisor sleeps between checks when no signal arrives (children exiting and
# stop requests wake it at once through the signal wakeup fd; this bounds a missed wakeup).
LOOP_WAKE_S = 1.0
# Variables a unit inherits from the supervisor's session, like a user manager's own environment;
# everything else — PATH included — must be passed with --setenv (D3: the unit does not inherit
# the caller's environment, and PATH is the detail that bites on day one).
INHERITED_ENV = ("HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR")
USAGE = "usage: python -m fleet.units.supervise --dir DIR --handshake-fd N  (the spec on stdin)"


class _Handshake:
    """The one line the supervisor owes `start`; sent at most once."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def send(self, code: str, unit: UnitRecord | None, detail: str) -> None:
        if self.fd is None:
            return
        record = unit.to_json() if unit is not None else None
        line = json.dumps({"code": code, "unit": record, "detail": detail}, sort_keys=True) + "\n"
        with contextlib.suppress(OSError):
            os.write(self.fd, line.encode())
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = None


def supervise(directory: str, handshake_fd: int) -> int:
    """Read the spec from stdin, then claim, launch, watch and collect; the handshake answers once."""
    handshake = _Handshake(handshake_fd)
    try:
        spec = json.loads(sys.stdin.read())
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        return _supervise(directory, spec, handshake)
    except Exception as exc:  # the caller must hear about any failure before the launch
        handshake.send("failed", None, f"supervisor error: {type(exc).__name__}: {exc}")
        raise


def _supervise(directory: str, spec: dict[str, Any], handshake: _Handshake) -> int:
    issue = int(spec["issue"])
    paths = Paths(directory, issue)
    lock_fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    # Never close lock_fd (nor open the lock file again) in this process: closing *any*
    # descriptor of a file drops the process's record locks on it.
    for _ in range(3):  # the holder can release between our F_SETLK and our F_GETLK
        if procs.try_lock(lock_fd):
            break
        holder = procs.lock_holder(paths.lock)
        if holder is not None:
            record = describe_holder(paths, issue, holder)
            code = "held-finished" if record.state == "deactivating" else "held-live"
            handshake.send(code, record, f"{unit_name(issue)} is held by pid {holder}")
            # A loser holds nothing and has nothing to flush (its stdio is /dev/null), and
            # `start` reaps it under the fleet lock: it leaves now, not through the
            # interpreter's teardown (7-15 ms of a held-live refusal, measured under load).
            os._exit(0)
    else:
        handshake.send("failed", None, "the name lock changed hands three times in a row")
        return 1
    return _run_unit(paths, issue, spec, handshake, lock_fd)


def _unit_env(
    spec_env: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(spec_env)
    env.update(extra or {})
    return env


def _run_unit(
    paths: Paths, issue: int, spec: dict[str, Any], handshake: _Handshake, lock_fd: int
) -> int:
    """We hold the name: launch, watch, collect. Exiting releases the lock: the unit is collected."""
    log_fd = _take_over(paths)
    wake = _Wake()
    launched = _launch(paths, issue, spec, handshake, log_fd, lock_fd)
    if launched is None:  # the name is free already; its on-failure alarm fires, once
        if spec.get("on_failure"):
            _notify(spec, issue, {"result": "exec-failed", "exit_code": None, "signal": None})
        return 1
    main, record = launched
    result, reaped = _watch(main, record, wake)
    _collect(paths, issue, spec, main, record, result, reaped)
    return 0


def _take_over(paths: Paths) -> int:
    """Clear a crashed predecessor's leftovers (we hold the lock, so it is safe), become the
    subreaper of everything the unit starts, and put our stdio on the name's log."""
    for stale in (paths.state, paths.stop):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    procs.become_subreaper()
    log_fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    return log_fd


class _Wake:
    """The signals the watch loop answers: SIGTERM/SIGINT ask for a stop, SIGCHLD only wakes it
    (through the wakeup fd, so no signal is lost between a check and the sleep)."""

    def __init__(self) -> None:
        self.fd, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        self.stop_requested = False
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, lambda *_: None)  # a handler, not SIG_IGN: exec resets it
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def _stop(self, *_: object) -> None:
        self.stop_requested = True

    def sleep(self, seconds: float) -> None:
        select.select([self.fd], [], [], seconds)
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 4096)


def _launch(
    paths: Paths,
    issue: int,
    spec: dict[str, Any],
    handshake: _Handshake,
    log_fd: int,
    lock_fd: int,
) -> tuple[subprocess.Popen[bytes], UnitRecord] | None:
    """Start the main process and answer the handshake; None when the exec failed (Type=exec: a
    failed exec is a failed start, reported as such). As systemd does with a unit whose exec
    failed, the name is free before the answer: a claim that hears "failed" finds it free."""
    record = UnitRecord(issue, supervisor_pid=os.getpid(), max_run_s=spec["max_run_s"])
    write_json(paths.state, record.to_json())
    start_us = time.monotonic_ns() // 1000
    started_at = now_iso()
    try:
        main = subprocess.Popen(
            spec["argv"], env=_unit_env(spec["env"]), cwd=spec.get("cwd") or None,
            stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, process_group=0,
            preexec_fn=procs.die_with_parent(signal.SIGTERM, os.getpid()),
        )  # fmt: skip
    except OSError as exc:
        os.unlink(paths.state)
        os.close(lock_fd)  # closing the descriptor drops our record lock: the name is free
        handshake.send("failed", None, f"exec {spec['argv'][0]!r} failed: {exc}")
        return None
    record = record._replace(state="active", pid=main.pid, start_us=start_us, started_at=started_at)
    write_json(paths.state, record.to_json())
    handshake.send("launched", record, f"{unit_name(issue)} launched as pid {main.pid}")
    print(f"fleet-units: {unit_name(issue)} main pid {main.pid}", flush=True)
    return main, record


def _watch(
    main: subprocess.Popen[bytes], record: UnitRecord, wake: _Wake
) -> tuple[str, dict[int, int]]:
    """Until the main process ends, a stop is asked for, or the maximum run time is reached: the
    named result (``exited``, ``stopped``, ``timeout``) and every child reaped meanwhile."""
    reaped: dict[int, int] = {}
    assert record.max_run_s is not None
    deadline = record.start_us / 1e6 + record.max_run_s
    while True:
        reaped.update(procs.reap_children())
        if main.pid in reaped:
            return "exited", reaped
        if wake.stop_requested:
            return "stopped", reaped
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout", reaped
        wake.sleep(min(remaining, LOOP_WAKE_S))


def _collect(
    paths: Paths,
    issue: int,
    spec: dict[str, Any],
    main: subprocess.Popen[bytes],
    record: UnitRecord,
    result: str,
    reaped: dict[int, int],
) -> None:
    """Kill what is left of the tree, record why the run ended (``task-N.result.json``), run the
    notifier on a failure, and remove the state file: the name is then free."""
    write_json(paths.state, record._replace(state="deactivating", result=result).to_json())
    grace = float(spec.get("kill_grace_s") or DEFAULT_KILL_GRACE_S)
    if result == "stopped":
        request = read_json(paths.stop) or {}
        grace = float(request.get("grace_s", grace))
    survivors = procs.kill_tree(os.getpid(), grace, reaped)
    status = reaped.get(main.pid)
    main.returncode = 0 if status is None else os.waitstatus_to_exitcode(status)
    code = None if status is None else os.waitstatus_to_exitcode(status)
    if result == "exited" and code is not None and code < 0:
        result = "signaled"
    failed = result in ("timeout", "signaled") or (result == "exited" and code != 0)
    outcome = {
        "issue": issue, "unit": unit_name(issue), "result": result,
        "exit_code": code if code is not None and code >= 0 else None,
        "signal": -code if code is not None and code < 0 else None,
        "start_us": record.start_us, "end_us": time.monotonic_ns() // 1000,
        "started_at": record.started_at, "ended_at": now_iso(), "max_run_s": record.max_run_s,
        "survivors": sorted(survivors), "notifier": None,
    }  # fmt: skip
    if failed and spec.get("on_failure"):
        outcome["notifier"] = _notify(spec, issue, outcome)
    write_json(paths.result, outcome)
    print(f"fleet-units: {unit_name(issue)} ended: {result} (exit {code})", flush=True)
    for path in (paths.state, paths.stop):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _notify(spec: Mapping[str, Any], issue: int, outcome: Mapping[str, Any]) -> dict[str, Any]:
    """Run the on-failure command; its result is recorded and otherwise ignored (D3 property 4)."""
    extra = {
        "FLEET_UNIT": unit_name(issue),
        "FLEET_RESULT": str(outcome["result"]),
        "FLEET_EXIT_CODE": "" if outcome["exit_code"] is None else str(outcome["exit_code"]),
        "FLEET_SIGNAL": "" if outcome["signal"] is None else str(outcome["signal"]),
    }
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", spec["on_failure"]], env=_unit_env(spec["env"], extra),
            stdin=subprocess.DEVNULL, process_group=0,
        )  # fmt: skip
    except OSError as exc:
        return {"error": str(exc)}
    try:
        rc: int | None = proc.wait(timeout=NOTIFIER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        rc = None
    procs.kill_tree(os.getpid(), 1.0)
    return {"exit": rc}


def main(argv: list[str]) -> int:
    """Exactly ``--dir DIR --handshake-fd N``, in any order: its one caller is ``start_answer``.
    A wrong command line has no handshake fd to answer on; ``start`` reads the EOF as a failure."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    if (
        len(argv) != 4
        or set(options) != {"--dir", "--handshake-fd"}
        or not options["--handshake-fd"].isdigit()
    ):
        print(USAGE, file=sys.stderr)
        return 2
    return supervise(options["--dir"], int(options["--handshake-fd"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
