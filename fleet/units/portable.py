"""The portable supervisor, dispatcher side: build one command line, parse one JSON answer.

For workers without a systemd user manager (PID 1 is not systemd, or ``systemd-run --user`` cannot
reach a bus). The worker side is ``python -m fleet.units`` (``fleet/units/__main__.py``), which holds
the name as a kernel lock in a detached supervising process; here are only pure builders and
parsers plus a thin :class:`PortableSupervisor` that sends each through the transport once, so a
claim (check 10) and a probe are one round trip each, exactly like the systemd backend.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.core.model import SupervisorKind, Unit, check_issue, parse_iso
from fleet.units.base import (
    Claim,
    ClaimCode,
    StopResult,
    SupervisorError,
    UnitStart,
    check_start_args,
    start_each,
)
from fleet.units.record import START_EXITS, UnitRecord

if TYPE_CHECKING:  # the worker side imports this package: keep fabric out of its start-up
    from fleet.transport import RunResult, Transport

WORKER_MODULE = "fleet.units"

_CLAIM_CODES = {
    "launched": ClaimCode.LAUNCHED,
    "held-live": ClaimCode.HELD_LIVE,
    "held-finished": ClaimCode.HELD_FINISHED,
    "failed": ClaimCode.SUPERVISOR_FAILED,
}

# Round-trip bounds. start: the worker waits at most 15 s for its supervisor's handshake
# (HANDSHAKE_TIMEOUT_S in __main__), plus interpreter start-up and an SSH round trip.
START_TIMEOUT_S = 45.0
# probe: a /proc-free directory listing and one F_GETLK per name; 30 s is a dead worker, not a slow one.
PROBE_TIMEOUT_S = 30.0
# stop: the caller's grace, plus the worker's margin (5 s) and its SIGKILL wait (5 s), plus SSH.
STOP_OVERHEAD_S = 30.0


def cli(python: str, *args: str) -> list[str]:
    return [python, "-m", WORKER_MODULE, *args]


def opt(name: str, value: str) -> str:
    """``--name=value`` as one word: a value that begins with ``-`` (a directory named ``-x``) given
    as a word of its own is read by argparse as another option, and the start is refused."""
    return f"--{name}={value}"


def build_start_command(
    *,
    python: str,
    state_dir: str,
    issue: int,
    argv: Sequence[str],
    env: Mapping[str, str],
    max_run_s: int,
    cwd: str | None = None,
    on_failure: str | None = None,
    kill_grace_s: float | None = None,
) -> str:
    """The worker's ``start`` line; every value is shell-quoted (``shlex.join``)."""
    check_issue(issue)
    check_start_args(argv, env, max_run_s)
    parts = cli(python, "start", opt("dir", state_dir), "--issue", str(issue))
    parts += ["--max-run-s", str(max_run_s)]
    parts += [opt("setenv", f"{key}={value}") for key, value in env.items()]
    if cwd:
        parts.append(opt("cwd", cwd))
    if on_failure:
        parts.append(opt("on-failure", on_failure))
    if kill_grace_s is not None:
        parts += ["--kill-grace-s", str(kill_grace_s)]
    return shlex.join([*parts, "--", *argv])


def build_probe_command(*, python: str, state_dir: str) -> str:
    return shlex.join(cli(python, "probe", opt("dir", state_dir)))


def build_stop_command(*, python: str, state_dir: str, issue: int, timeout_s: float) -> str:
    check_issue(issue)
    if not timeout_s >= 0:
        raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
    parts = cli(python, "stop", opt("dir", state_dir), "--issue", str(issue))
    return shlex.join([*parts, "--timeout-s", str(float(timeout_s))])


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last stdout line that is a JSON object (a login shell may print noise before it)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def unit_from_record(record: object, *, worker: str, master: str) -> Unit | None:
    """A worker's record -> Unit; None when it is not a record or names no issue. An unreadable
    wall-clock start reads as unknown, never as a guessed time."""
    parsed = UnitRecord.from_json(record)
    if parsed is None:
        return None
    try:
        started = parse_iso(parsed.started_at) if parsed.started_at else None
    except ValueError:
        started = None
    return Unit(
        issue=parsed.issue,
        worker=worker,
        master=master,
        state=parsed.state,
        start_us=parsed.start_us,
        started_at=started,
    )


def _tail(text: str, limit: int = 500) -> str:
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def parse_start(result: RunResult, *, issue: int, worker: str, master: str) -> Claim:
    """The worker's ``start`` answer -> Claim. The JSON code decides; the exit code must agree."""
    payload = last_json_object(result.stdout)
    code = payload.get("code") if payload else None
    if payload is None or code not in _CLAIM_CODES:
        return Claim(
            ClaimCode.SUPERVISOR_FAILED,
            None,
            f"no answer from the portable supervisor (exit {result.exit}): {_tail(result.stderr)}",
        )
    detail = str(payload.get("detail") or "")
    if START_EXITS[code] != result.exit:
        return Claim(
            ClaimCode.SUPERVISOR_FAILED,
            None,
            f"inconsistent answer: code {code} with exit {result.exit}: {detail}",
        )
    claim_code = _CLAIM_CODES[code]
    if claim_code is ClaimCode.SUPERVISOR_FAILED:
        return Claim(claim_code, None, detail or _tail(result.stderr))
    unit = unit_from_record(payload.get("unit"), worker=worker, master=master)
    if unit is None or unit.issue != issue:
        # The name is held (or launched) — that much the exit code proves; describe it minimally.
        unit = Unit(issue=issue, worker=worker, master=master, state="activating", start_us=0)
        detail += " (unit record unreadable)"
    return Claim(claim_code, unit, detail)


def parse_probe(result: RunResult, *, worker: str, master: str) -> tuple[Unit, ...]:
    """The worker's ``probe`` answer -> units, ordered by issue. Unreadable = SupervisorError."""
    payload = last_json_object(result.stdout)
    if payload is None or result.exit != 0 or "error" in payload:
        why = payload.get("error") if payload else _tail(result.stderr)
        raise SupervisorError(f"portable probe on {worker} failed (exit {result.exit}): {why}")
    records = payload.get("units")
    if not isinstance(records, list):
        raise SupervisorError(f"portable probe on {worker}: no unit list in {_tail(result.stdout)}")
    units = []
    for record in records:
        unit = unit_from_record(record, worker=worker, master=master)
        if unit is None:
            raise SupervisorError(f"portable probe on {worker}: unreadable record {record!r}")
        units.append(unit)
    return tuple(sorted(units, key=lambda u: u.issue))


def parse_stop(result: RunResult, *, worker: str) -> StopResult:
    payload = last_json_object(result.stdout)
    if payload is None or not isinstance(payload.get("was_live"), bool):
        raise SupervisorError(
            f"portable stop on {worker}: no answer (exit {result.exit}): {_tail(result.stderr)}"
        )
    stopped = payload.get("stopped") is True
    return StopResult(
        was_live=payload["was_live"], stopped=stopped, detail=str(payload.get("detail", ""))
    )


def _answered(answer: tuple[dict[str, Any], int]) -> RunResult:
    """A worker-side answer obtained in this process, as the transport would have returned it."""
    from fleet.transport import RunResult  # the dispatcher side only: the worker never gets here

    payload, code = answer
    return RunResult(code, json.dumps(payload) + "\n", "")


class PortableSupervisor:
    """Units under the portable supervisor of one master on one worker.

    ``state_dir`` is a path on the worker (``~`` allowed; it is expanded there). ``notifier`` is a
    shell command run when a unit fails (``$FLEET_UNIT``, ``$FLEET_RESULT`` are set); its result
    is ignored (D3 property 4).
    """

    kind = SupervisorKind.PORTABLE

    def __init__(
        self,
        transport: Transport,
        *,
        worker: str,
        master: str,
        state_dir: str,
        python: str = "python3",
        notifier: str | None = None,
        kill_grace_s: float | None = None,
    ) -> None:
        self.transport = transport
        self.worker = worker
        self.master = master
        self.state_dir = state_dir
        self.python = python
        self.notifier = notifier
        self.kill_grace_s = kill_grace_s

    def probe(self) -> tuple[Unit, ...]:
        if self._here:
            from fleet.units.__main__ import probe_answer  # the worker side, run in this process

            result = _answered(probe_answer(self.state_dir))
        else:
            command = build_probe_command(python=self.python, state_dir=self.state_dir)
            result = self.transport.run(command, timeout=PROBE_TIMEOUT_S)
        return parse_probe(result, worker=self.worker, master=self.master)

    @property
    def _here(self) -> bool:
        """The worker is this machine, as this user: its unit records are files we can read and
        its supervisor a process we can start, with no shell and no second interpreter between."""
        from fleet.transport import LocalTransport  # the dispatcher side only

        return isinstance(self.transport, LocalTransport)

    def start(
        self,
        issue: int,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        max_run_s: int,
        cwd: str | None = None,
    ) -> Claim:
        if self._here:
            from fleet.units.__main__ import start_answer  # the worker side, run in this process

            check_issue(issue)
            check_start_args(argv, env, max_run_s)
            spec = {
                "issue": issue, "argv": list(argv), "env": dict(env), "max_run_s": max_run_s,
                "cwd": cwd, "on_failure": self.notifier, "kill_grace_s": self.kill_grace_s,
            }  # fmt: skip
            result = _answered(start_answer(self.state_dir, spec, python=self.python))
        else:
            command = build_start_command(
                python=self.python,
                state_dir=self.state_dir,
                issue=issue,
                argv=argv,
                env=env,
                max_run_s=max_run_s,
                cwd=cwd,
                on_failure=self.notifier,
                kill_grace_s=self.kill_grace_s,
            )
            result = self.transport.run(command, timeout=START_TIMEOUT_S)
        return parse_start(result, issue=issue, worker=self.worker, master=self.master)

    def start_many(self, starts: Sequence[UnitStart]) -> list[Claim | None]:
        return start_each(self, starts)

    def stop(self, issue: int, *, timeout_s: float = 20.0) -> StopResult:
        command = build_stop_command(
            python=self.python, state_dir=self.state_dir, issue=issue, timeout_s=timeout_s
        )
        result = self.transport.run(command, timeout=timeout_s + STOP_OVERHEAD_S)
        return parse_stop(result, worker=self.worker)

    def __repr__(self) -> str:
        return f"PortableSupervisor({self.worker}, {self.master}, {self.state_dir})"
