"""The portable supervisor, worker side: ``python -m fleet.units {start,probe,stop,notify} --dir DIR``.

Where a worker has no systemd user manager, this gives the guarantees ``systemd-run --user`` gives
(D3, D4), with the same names and the same ActiveState words:

* **the name is an exclusive kernel lock** — a POSIX record lock on ``DIR/task-N.lock`` held by one
  detached supervising process for the unit's whole life; a crash (even SIGKILL) frees it at once;
* **detached** — ``start`` spawns the supervisor (``supervise.py``) in a new session with its stdio
  on ``DIR/task-N.log`` and returns after a one-line handshake, so the run survives the
  dispatcher's disconnect;
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
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

from fleet.core.names import issue_of, unit_name
from fleet.units import procs
from fleet.units.record import START_EXITS
from fleet.units.state import Paths, describe_holder, now_iso, write_json
from fleet.units.supervise import DEFAULT_KILL_GRACE_S

# How long `start` waits for the supervisor's handshake: interpreter start (~50 ms idle, 1–2 s
# measured on a box at load 9), the lock and
# the exec take well under a second; this bounds a wedged supervisor, which is then killed so that
# no unit runs that the caller was told failed.
HANDSHAKE_TIMEOUT_S = 15.0
# What `stop` allows the supervisor beyond the grace to reap, write the result and exit before it
# falls back to SIGKILLing the supervisor and the tree itself.
STOP_MARGIN_S = 5.0
# How often `stop` re-tests the lock while it waits for the name to be free.
STOP_POLL_S = 0.05

# The directory holding the ``fleet`` package this module was loaded from, however it was installed
# (a checkout on PYTHONPATH, an editable or a regular install): the supervisor is started with it
# first on PYTHONPATH, so it runs this very code and needs no site-packages to find it.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
# The supervising process (``supervise.py``) imports only the standard library and fleet, from
# PACKAGE_ROOT; -S leaves out `site`, whose site-packages scan and .pth hooks (an editable
# install's finder, a vendor's certificate patch) cost 41 ms against 9 ms for a bare start on the
# box of docs/performance.md. The unit itself is started without these flags.
SUPERVISOR_FLAGS = ("-S",)


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
            [python or sys.executable, *SUPERVISOR_FLAGS, "-m", "fleet.units.supervise",
             "--dir", directory, "--handshake-fd", str(write_end)],
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
    if payload["code"] in ("held-live", "held-finished"):
        # A loser exits right after its handshake: reaped here. A failed start's supervisor runs
        # its on-failure alarm first (up to the notifier's bound), and a claim does not wait for
        # an alarm: it is left to finish on its own, detached like a launched one.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=HANDSHAKE_TIMEOUT_S)
    return payload, START_EXITS[payload["code"]]


def _failed(detail: str) -> Answer:
    return {"code": "failed", "unit": None, "detail": detail}, START_EXITS["failed"]


def _read_line(fd: int, timeout_s: float) -> str | None:
    """Read up to the first newline or EOF; None on timeout."""
    deadline = time.monotonic() + timeout_s
    buf = b""
    poller = select.poll()  # not select: a dispatcher's descriptors can number past 1024
    poller.register(fd, select.POLLIN)
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        if not poller.poll(remaining * 1000):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n", 1)[0].decode("utf-8", "replace")


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
    write_json(paths.stop, {"grace_s": args.timeout_s, "at": now_iso()})
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
        line = {"unit": args.unit, "failed_at": now_iso(),
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
