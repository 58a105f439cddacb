"""The portable supervisor, worker side: ``python -m fleet.units {start,probe,stop,notify} --dir DIR``.

Where a worker has no systemd user manager, this gives the guarantees ``systemd-run --user`` gives
(D3, D4), with the same names and the same ActiveState words:

* **the name is an exclusive kernel lock** — a POSIX record lock on ``DIR/task-N.lock`` held by one
  detached supervising process for the unit's whole life; a crash (even SIGKILL) frees it at once;
* **detached** — ``start`` spawns the supervisor in a new session with its stdio on ``DIR/task-N.log``
  and returns after a one-line handshake, so the run survives the dispatcher's disconnect;
* **a stop takes the whole tree** — the supervisor is a child subreaper and kills every descendant,
  a ``setsid``-detached grandchild included, like systemd's control-group kill;
* **collected when it ends** — state file removed, lock released; ``DIR/task-N.result.json`` keeps
  why the last run of the name ended (``exited``, ``signaled``, ``timeout``, ``stopped``);
* **a maximum run time** (systemd's ``RuntimeMaxSec=``) — reaching it is the named result ``timeout``;
* **an on-failure notifier** whose own result is ignored (it "always exits 0", D3 property 4).

Each subcommand prints exactly one JSON object on stdout, so a claim or a probe is one transport
round trip. ``DIR/task-N.json`` (the state file) is informative only: the lock is the truth, and a
state file whose supervisor does not hold the lock is stale, ignored by a probe and replaced by the
next claim of the name (a probe never deletes it: between its check and a delete a new run could
have written its own).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fleet.core.names import issue_of, unit_name
from fleet.units import procs
from fleet.units.record import START_EXITS, UnitRecord

# How long `start` waits for the supervisor's handshake: interpreter start (~50 ms idle, 1–2 s
# measured on a box at load 9), the lock and
# the exec take well under a second; this bounds a wedged supervisor, which is then killed so that
# no unit runs that the caller was told failed.
HANDSHAKE_TIMEOUT_S = 15.0
# SIGTERM-to-SIGKILL grace when the run time limit is reached or the main process leaves children
# behind; the same default as a stop (Supervisor.stop timeout_s), long enough for the runner's
# EXIT trap to post its terminal marker (D5).
DEFAULT_KILL_GRACE_S = 20.0
# Bounds the on-failure notifier: its result is ignored, and a hung notifier must not keep the
# name held (the unit would look "held-finished" forever).
NOTIFIER_TIMEOUT_S = 30.0
# What `stop` allows the supervisor beyond the grace to reap, write the result and exit before it
# falls back to SIGKILLing the supervisor and the tree itself.
STOP_MARGIN_S = 5.0
# How often `stop` re-tests the lock while it waits for the name to be free.
STOP_POLL_S = 0.05
# The longest the supervisor sleeps between checks when no signal arrives (children exiting and
# stop requests wake it at once through the signal wakeup fd; this bounds a missed wakeup).
LOOP_WAKE_S = 1.0
# Variables a unit inherits from the supervisor's session, like a user manager's own environment;
# everything else — PATH included — must be passed with --setenv (D3: the unit does not inherit
# the caller's environment, and PATH is the detail that bites on day one).
INHERITED_ENV = ("HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR")

# The directory holding the ``fleet`` package this module was loaded from: the supervisor is
# started with it first on PYTHONPATH, so it runs this very code.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Paths:
    """The files of one name under the state directory."""

    def __init__(self, directory: str, issue: int) -> None:
        base = os.path.join(directory, unit_name(issue))
        self.lock = base + ".lock"
        self.state = base + ".json"
        self.log = base + ".log"
        self.result = base + ".result.json"
        self.stop = base + ".stop"


def _write_json(path: str, data: Mapping[str, Any]) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a record."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe_holder(paths: Paths, issue: int, holder: int) -> UnitRecord:
    """The unit record for a held name. The state file counts only if its writer holds the lock."""
    state = UnitRecord.from_json(_read_json(paths.state))
    if state is not None and state.supervisor_pid == holder:
        return state
    start_us = procs.start_us_of(holder) if holder > 0 else 0
    return UnitRecord(issue, supervisor_pid=holder, start_us=start_us)


def _emit(payload: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload, sort_keys=True) + "\n")
    sys.stdout.flush()


# -- start ---------------------------------------------------------------------------------------


def cmd_start(args: argparse.Namespace) -> int:
    """Spawn the detached supervisor and relay its handshake: the claim, in one round trip."""
    env: dict[str, str] = {}
    for item in args.setenv:
        key, sep, value = item.partition("=")
        if not sep or not key:
            return _emit_answer(_failed(f"--setenv needs KEY=VALUE, got {item!r}"))
        env[key] = value
    spec = {
        "issue": args.issue,
        "argv": args.argv,
        "env": env,
        "max_run_s": args.max_run_s,
        "cwd": args.cwd,
        "on_failure": args.on_failure,
        "kill_grace_s": args.kill_grace_s,
    }
    return _emit_answer(start_answer(args.dir, spec))


Answer = tuple[dict[str, Any], int]  # the one JSON object a subcommand prints, and its exit code


def _emit_answer(answer: Answer) -> int:
    _emit(answer[0])
    return answer[1]


def start_answer(directory: str, spec: dict[str, Any], python: str | None = None) -> Answer:
    """The claim: spawn the detached supervisor (``python``, this interpreter by default) and
    relay its handshake. ``start`` prints this; a dispatcher on this very machine calls it
    directly, so its claim costs one process start, the supervisor's, and no shell."""
    directory = os.path.expanduser(directory)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    sup_env = dict(os.environ)
    sup_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p
    )
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "fleet.units", "supervise", "--dir", directory,
             "--handshake-fd", str(write_end)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(write_end,), start_new_session=True, cwd="/", env=sup_env,
        )  # fmt: skip
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        return _failed(f"could not spawn the supervisor: {exc}")
    os.close(write_end)
    assert proc.stdin is not None
    # The spec (env included) goes through a pipe, not argv: the supervisor lives for hours and
    # its command line is readable by every user of the machine.
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except OSError:  # it died before reading its spec (EPIPE): its handshake, or none, says why
        with contextlib.suppress(OSError):
            proc.stdin.close()
    line = _read_line(read_end, HANDSHAKE_TIMEOUT_S)
    os.close(read_end)
    if line is None:
        procs.signal_all(procs.descendants(proc.pid) | {proc.pid}, signal.SIGKILL)
        proc.wait()
        return _failed(f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f}s; supervisor killed")
    try:
        payload = json.loads(line) if line else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict) or payload.get("code") not in START_EXITS:
        try:
            rc: int | None = proc.wait(timeout=1.0) if not line else proc.poll()
        except subprocess.TimeoutExpired:
            rc = None
        return _failed(f"supervisor gave no valid handshake (exit {rc}): {line[:200]!r}")
    if payload["code"] != "launched":
        proc.wait(timeout=HANDSHAKE_TIMEOUT_S)  # a loser exits right after its handshake
    return payload, START_EXITS[payload["code"]]


def _failed(detail: str) -> Answer:
    return {"code": "failed", "unit": None, "detail": detail}, START_EXITS["failed"]


def _read_line(fd: int, timeout_s: float) -> str | None:
    """Read up to the first newline or EOF; None on timeout."""
    deadline = time.monotonic() + timeout_s
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace")


# -- supervise (the detached process that holds the name) ----------------------------------------


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


def cmd_supervise(args: argparse.Namespace) -> int:
    handshake = _Handshake(args.handshake_fd)
    try:
        spec = json.loads(sys.stdin.read())
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        return _supervise(args.dir, spec, handshake)
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
            return 0
    else:
        handshake.send("failed", None, "the name lock changed hands three times in a row")
        return 1
    return _run_unit(paths, issue, spec, handshake)


def _unit_env(
    spec_env: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(spec_env)
    env.update(extra or {})
    return env


def _run_unit(paths: Paths, issue: int, spec: dict[str, Any], handshake: _Handshake) -> int:
    """We hold the name: launch, watch, collect. Exiting releases the lock: the unit is collected."""
    log_fd = _take_over(paths)
    wake = _Wake()
    launched = _launch(paths, issue, spec, handshake, log_fd)
    if launched is None:
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
    paths: Paths, issue: int, spec: dict[str, Any], handshake: _Handshake, log_fd: int
) -> tuple[subprocess.Popen[bytes], UnitRecord] | None:
    """Start the main process and answer the handshake; None when the exec failed (Type=exec: a
    failed exec is a failed start, reported as such, and the name is freed)."""
    record = UnitRecord(issue, supervisor_pid=os.getpid(), max_run_s=spec["max_run_s"])
    _write_json(paths.state, record.to_json())
    start_us = time.monotonic_ns() // 1000
    started_at = _now_iso()
    try:
        main = subprocess.Popen(
            spec["argv"], env=_unit_env(spec["env"]), cwd=spec.get("cwd") or None,
            stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, process_group=0,
            preexec_fn=functools.partial(procs.die_with_parent, signal.SIGTERM, os.getpid()),
        )  # fmt: skip
    except OSError as exc:
        os.unlink(paths.state)
        handshake.send("failed", None, f"exec {spec['argv'][0]!r} failed: {exc}")
        return None
    record = replace(record, state="active", pid=main.pid, start_us=start_us, started_at=started_at)
    _write_json(paths.state, record.to_json())
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
    _write_json(paths.state, replace(record, state="deactivating", result=result).to_json())
    grace = float(spec.get("kill_grace_s") or DEFAULT_KILL_GRACE_S)
    if result == "stopped":
        request = _read_json(paths.stop) or {}
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
        "started_at": record.started_at, "ended_at": _now_iso(), "max_run_s": record.max_run_s,
        "survivors": sorted(survivors), "notifier": None,
    }  # fmt: skip
    if failed and spec.get("on_failure"):
        outcome["notifier"] = _notify(spec, issue, outcome)
    _write_json(paths.result, outcome)
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


# -- probe, stop, notify -------------------------------------------------------------------------


def cmd_probe(args: argparse.Namespace) -> int:
    """Every held name under DIR, without taking any lock (F_GETLK only)."""
    return _emit_answer(probe_answer(args.dir))


def probe_answer(directory: str) -> Answer:
    """What ``probe`` prints: every held name's record. A dispatcher on this machine calls it
    directly: reading its own unit records needs no child process."""
    directory = os.path.expanduser(directory)
    units: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        names = []  # nothing was ever started here
    except OSError as exc:
        return {"error": f"cannot list {directory}: {exc}"}, 1
    for name in names:
        issue = issue_of(name.removesuffix(".lock")) if name.endswith(".lock") else None
        if issue is None:
            continue
        paths = Paths(directory, issue)
        try:
            holder = procs.lock_holder(paths.lock)
        except OSError as exc:
            return {"error": f"cannot test {paths.lock}: {exc}"}, 1
        if holder is not None:
            units.append(describe_holder(paths, issue, holder).to_json())
    return {"units": units}, 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Ask the holder to stop (it kills the tree), wait for the name; fall back to SIGKILL."""
    paths = Paths(os.path.expanduser(args.dir), args.issue)
    name = unit_name(args.issue)
    holder = procs.lock_holder(paths.lock)
    if holder is None:
        _emit({"was_live": False, "stopped": True, "detail": f"no unit holds {name}"})
        return 0
    if holder < 0:
        _emit({"was_live": True, "stopped": False, "detail": f"{name} held outside our pid space"})
        return 1
    _write_json(paths.stop, {"grace_s": args.timeout_s, "at": _now_iso()})
    procs.signal_all([holder], signal.SIGTERM)
    if _wait_free(paths.lock, args.timeout_s + STOP_MARGIN_S):
        _emit({"was_live": True, "stopped": True, "detail": f"{name} stopped (pid {holder})"})
        return 0
    # The supervisor did not finish in time: take its tree first (its orphans would otherwise
    # re-parent away from it), then the supervisor itself; the kernel then frees the name.
    procs.signal_all(procs.descendants(holder), signal.SIGKILL)
    procs.signal_all([holder], signal.SIGKILL)
    freed = _wait_free(paths.lock, procs.SIGKILL_WAIT_S)
    detail = f"{name}: supervisor {holder} did not end in time; " + (
        "killed with its tree" if freed else "still held after SIGKILL"
    )
    _emit({"was_live": True, "stopped": freed, "detail": detail})
    return 0 if freed else 1


def _wait_free(lock: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while procs.lock_holder(lock) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(STOP_POLL_S)
    return True


def cmd_notify(args: argparse.Namespace) -> int:
    """The OnFailure notifier: say that a unit failed, on stderr (the journal) and optionally as a
    JSON line in a log file. Always exits 0, or a failing notifier would trigger its own
    OnFailure and recurse (D3 property 4)."""
    try:
        line = {"unit": args.unit, "failed_at": _now_iso(),
                "result": os.environ.get("FLEET_RESULT") or os.environ.get("MONITOR_SERVICE_RESULT")}  # fmt: skip
        print(f"fleet: unit {args.unit} failed ({line['result'] or 'unknown result'})",
              file=sys.stderr)  # fmt: skip
        if args.log:
            with open(os.path.expanduser(args.log), "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line, sort_keys=True) + "\n")
    except Exception as exc:
        with contextlib.suppress(Exception):
            print(f"fleet: notifier error ignored: {exc}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.units", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="claim task-N and launch argv under a detached supervisor")
    start.add_argument("--dir", required=True)
    start.add_argument("--issue", type=int, required=True)
    start.add_argument("--max-run-s", type=int, required=True)
    start.add_argument("--setenv", action="append", default=[], metavar="KEY=VALUE")
    start.add_argument("--cwd")
    start.add_argument("--on-failure", help="shell command run when the unit fails")
    start.add_argument("--kill-grace-s", type=float, default=DEFAULT_KILL_GRACE_S)
    start.add_argument("argv", nargs="+")
    start.set_defaults(func=cmd_start)
    sup = sub.add_parser("supervise", help=argparse.SUPPRESS)
    sup.add_argument("--dir", required=True)
    sup.add_argument("--handshake-fd", type=int, required=True)
    sup.set_defaults(func=cmd_supervise)
    probe = sub.add_parser("probe", help="list held task-* names as JSON")
    probe.add_argument("--dir", required=True)
    probe.set_defaults(func=cmd_probe)
    stop = sub.add_parser("stop", help="stop task-N and its whole process tree")
    stop.add_argument("--dir", required=True)
    stop.add_argument("--issue", type=int, required=True)
    stop.add_argument("--timeout-s", type=float, default=DEFAULT_KILL_GRACE_S)
    stop.set_defaults(func=cmd_stop)
    notify = sub.add_parser("notify", help="the on-failure notifier (always exits 0)")
    notify.add_argument("unit")
    notify.add_argument("--log")
    notify.set_defaults(func=cmd_notify)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
