"""The systemd backend: ``systemd-run --user --unit=task-<issue> --collect`` on the worker's master.

Pure builders and parsers plus a thin :class:`SystemdSupervisor`. Facts this rests on
(docs/facts.md):

* a second start of a live *or* loaded-but-failed name prints "Unit task-N.service was already
  loaded or has a fragment file" with exit 1 — the same exit code as every other failure. So the
  claim never reads the error string: the start command runs ``systemctl --user show`` in the same
  round trip and the classification reads ``LoadState``/``ActiveState`` (pre-flight check 10, D20);
* ``-p Type=exec`` reports the start after the exec, not the fork; ``--collect`` removes the unit
  when it ends, failed or not (a collected unit shows ``LoadState=not-found``);
* ``ExecMainStartTimestampMonotonic`` is the start in µs of CLOCK_MONOTONIC (0 if never started),
  the order D4's repair keeps the oldest by;
* the unit does not inherit the caller's environment: PATH goes in with ``--setenv`` (D3).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fleet.core.model import SupervisorKind, Unit, check_issue, issue_of, unit_name
from fleet.units.base import (
    FINISHED_STATES,
    LIVE_STATES,
    Claim,
    ClaimCode,
    StopResult,
    SupervisorError,
    UnitsParseError,
    check_start_args,
)

if TYPE_CHECKING:  # the worker side imports this package: keep fabric out of its start-up
    from fleet.transport import RunResult, Transport

SHOW_PROPS = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "ExecMainPID",
    "ExecMainStartTimestamp",
    "ExecMainStartTimestampMonotonic",
    "ExecMainExitTimestampMonotonic",
)
MARK = "@@fleet-units@@"
_MARK_RE = re.compile(rf"^{re.escape(MARK)} (\w+) rc=(-?[0-9]+)$")
NOTIFIER_TEMPLATE = "fleet-notify@.service"
_SAFE_PYTHON = re.compile(r"^[A-Za-z0-9_./+-]+$")
_DIGITS = re.compile(r"^[0-9]+$")

# Round-trip bounds. start: Type=exec returns once the exec happened; 60 s means the user
# manager is wedged, not busy. probe: one list-units and one show.
START_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 30.0
# stop: after the caller's grace, SIGKILL gets this long to empty the cgroup before we report.
KILL_WAIT_S = 5
# stop: what the round trip may take beyond the caller's grace and KILL_WAIT_S (SSH, systemctl).
STOP_OVERHEAD_S = 30.0
# stop: how often the worker re-reads ActiveState while it waits for the unit to go.
STOP_POLL_S = 0.2


def show_command(units: str) -> str:
    """``systemctl --user show`` of the named units (a shell word list) with timestamps in UTC."""
    props = " ".join(f"-p {p}" for p in SHOW_PROPS)
    return f"TZ=UTC systemctl --user show {units} {props}"


def on_failure_unit(notifier: str, name: str) -> str:
    """``fleet-notify@.service`` -> ``fleet-notify@task-42.service``; other names unchanged."""
    if notifier.endswith("@.service"):
        return notifier.removesuffix(".service") + f"{name}.service"
    return notifier


def build_start_command(
    *,
    issue: int,
    argv: Sequence[str],
    env: Mapping[str, str],
    max_run_s: int,
    cwd: str | None = None,
    notifier: str | None = None,
) -> str:
    """systemd-run, then (whatever it exits with) a mark with its exit code and the unit's state."""
    check_start_args(argv, env, max_run_s)
    name = unit_name(issue)
    run = ["systemd-run", "--user", f"--unit={name}", "--collect", "-p", "Type=exec"]
    run += ["-p", f"RuntimeMaxSec={max_run_s}"]
    if notifier:
        run += ["-p", f"OnFailure={on_failure_unit(notifier, name)}"]
    run += [f"--setenv={key}={value}" for key, value in env.items()]
    if cwd:
        run.append(f"--working-directory={cwd}")
    run += ["--", *argv]
    return (
        f'{shlex.join(run)}; rc=$?; echo; echo "{MARK} start rc=$rc"; '
        f"{show_command(shlex.quote(name + '.service'))}"
    )


def build_probe_command() -> str:
    """List every task-* service (live or lingering), then show them all, in one round trip."""
    return (
        "out=$(systemctl --user list-units 'task-*' --all --plain --no-legend --full 2>&1); "
        f'rc=$?; echo "{MARK} list rc=$rc"; printf \'%s\\n\' "$out"; '
        '[ "$rc" -eq 0 ] || exit 0; '
        "names=$(printf '%s\\n' \"$out\" | grep -oE 'task-[0-9]+\\.service' | sort -u); "
        f'[ -n "$names" ] || exit 0; echo "{MARK} show rc=0"; {show_command("$names")}; '
        f'echo "{MARK} end rc=$?"'
    )


def build_stop_command(issue: int, timeout_s: float) -> str:
    """Stop without blocking, poll ActiveState for ``timeout_s``, then SIGKILL the whole cgroup."""
    check_issue(issue)
    if not timeout_s >= 0:
        raise ValueError(f"timeout_s must be >= 0, got {timeout_s!r}")
    unit = shlex.quote(unit_name(issue) + ".service")
    grace = max(1, int(-(-timeout_s // 1)))  # whole seconds, rounded up: `date +%s` resolution
    return (
        f'echo "{MARK} before rc=0"; {show_command(unit)}; '
        f"systemctl --user stop --no-block {unit} >/dev/null 2>&1; "
        f"end=$(( $(date +%s) + {grace} )); killed=0; "
        "while :; do "
        f"st=$(systemctl --user show {unit} -p ActiveState --value 2>/dev/null); "
        'case "$st" in inactive|failed|"") break;; esac; '
        'if [ "$(date +%s)" -ge "$end" ]; then '
        '[ "$killed" -eq 0 ] || break; '
        f"systemctl --user kill --signal=SIGKILL {unit} >/dev/null 2>&1; killed=1; "
        f"end=$(( $(date +%s) + {KILL_WAIT_S} )); fi; sleep {STOP_POLL_S}; done; "
        f"systemctl --user reset-failed {unit} >/dev/null 2>&1; "
        f'echo "{MARK} after rc=$killed"; {show_command(unit)}'
    )


def parse_show(text: str) -> list[dict[str, str]]:
    """``systemctl show`` output -> one dict per unit (blocks split by blank lines).

    Lines without ``=`` are ignored; an empty input is an empty list. Never raises.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
                current = {}
            continue
        key, sep, value = line.partition("=")
        if sep and key.strip():
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def split_sections(text: str) -> dict[str, tuple[int, str]]:
    """Split output at ``@@fleet-units@@ <section> rc=<n>`` marks: section -> (rc, body)."""
    sections: dict[str, tuple[int, str]] = {}
    name: str | None = None
    rc = 0
    body: list[str] = []
    for line in text.splitlines():
        match = _MARK_RE.match(line.strip())
        if match:
            if name is not None:
                sections[name] = (rc, "\n".join(body))
            name, rc, body = match.group(1), int(match.group(2)), []
        elif name is not None:
            body.append(line)
    if name is not None:
        sections[name] = (rc, "\n".join(body))
    return sections


def classify_start(rc: int, props: Mapping[str, str]) -> ClaimCode:
    """Check 10's four outcomes from systemd-run's exit code and the unit's state (never stderr)."""
    if rc == 0:
        return ClaimCode.LAUNCHED
    if props.get("LoadState") == "loaded":
        state = props.get("ActiveState", "")
        if state in LIVE_STATES:
            return ClaimCode.HELD_LIVE
        if state in FINISHED_STATES:
            return ClaimCode.HELD_FINISHED
    return ClaimCode.SUPERVISOR_FAILED


def parse_timestamp(text: str) -> datetime | None:
    """``Thu 2026-01-01 12:00:00[.123456] UTC`` (we run show with TZ=UTC) -> aware datetime."""
    parts = text.split()
    if len(parts) != 4 or parts[3] != "UTC":
        return None
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(f"{parts[1]} {parts[2]}", fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def unit_from_props(props: Mapping[str, str], *, worker: str, master: str) -> Unit | None:
    """One ``show`` block -> Unit; None for a block that is not a loaded ``task-<issue>``."""
    issue = issue_of(props.get("Id", ""))
    if issue is None or props.get("LoadState") in (None, "", "not-found"):
        return None
    raw = props.get("ExecMainStartTimestampMonotonic", "0")
    digits = _DIGITS.match(raw)
    return Unit(
        issue=issue,
        worker=worker,
        master=master,
        state=props.get("ActiveState") or "unknown",
        start_us=int(raw) if digits else 0,
        started_at=parse_timestamp(props.get("ExecMainStartTimestamp", "")),
    )


def parse_start(result: RunResult, *, issue: int, worker: str, master: str) -> Claim:
    sections = split_sections(result.stdout)
    if "start" not in sections:
        return Claim(
            ClaimCode.SUPERVISOR_FAILED,
            None,
            f"no answer from systemd-run (exit {result.exit}): {result.stderr.strip()[-500:]}",
        )
    rc, body = sections["start"]
    blocks = parse_show(body)
    props = blocks[0] if blocks else {}
    code = classify_start(rc, props)
    unit = unit_from_props(props, worker=worker, master=master)
    if code is ClaimCode.SUPERVISOR_FAILED:
        state = f"{props.get('LoadState', '?')}/{props.get('ActiveState', '?')}"
        return Claim(
            code, None, f"systemd-run exit {rc}, unit {state}: {result.stderr.strip()[-500:]}"
        )
    if unit is None or unit.issue != issue:
        # Launched and already collected (a fast run), or a show we could not read.
        unit = Unit(issue=issue, worker=worker, master=master, state="inactive", start_us=0)
    detail = f"{unit_name(issue)} {props.get('ActiveState', 'gone')} (systemd-run exit {rc})"
    return Claim(code, unit, detail)


def parse_probe(result: RunResult, *, worker: str, master: str) -> tuple[Unit, ...]:
    sections = split_sections(result.stdout)
    if "list" not in sections:
        raise SupervisorError(
            f"systemd probe on {worker}: no answer: {result.stderr.strip()[-500:]}"
        )
    rc, body = sections["list"]
    if rc != 0:
        raise SupervisorError(
            f"systemd probe on {worker}: list-units exit {rc}: {body.strip()[-500:]}"
        )
    if "task-" not in body:
        return ()
    if "show" not in sections or sections.get("end", (1, ""))[0] != 0:
        raise SupervisorError(
            f"systemd probe on {worker}: show failed: {result.stderr.strip()[-500:]}"
        )
    blocks = parse_show(sections["show"][1])
    units = [u for b in blocks if (u := unit_from_props(b, worker=worker, master=master))]
    return tuple(sorted(units, key=lambda u: u.issue))


def parse_stop(result: RunResult, *, issue: int, worker: str) -> StopResult:
    sections = split_sections(result.stdout)
    if "before" not in sections or "after" not in sections:
        raise SupervisorError(
            f"systemd stop on {worker}: no answer: {result.stderr.strip()[-500:]}"
        )
    before = (parse_show(sections["before"][1]) or [{}])[0]
    killed, after_text = sections["after"]
    after = (parse_show(after_text) or [{}])[0]
    if "LoadState" not in before or "LoadState" not in after:
        raise UnitsParseError(f"systemd stop on {worker}: show printed no LoadState")
    was_live = before.get("LoadState") != "not-found" and (
        before.get("ActiveState") in LIVE_STATES or before.get("ActiveState") == "deactivating"
    )
    gone = after.get("LoadState") == "not-found" or after.get("ActiveState") in (
        "inactive",
        "failed",
    )
    how = "SIGKILL after the grace" if killed else "SIGTERM"
    detail = (
        f"{unit_name(issue)}: {before.get('ActiveState')} -> "
        f"{after.get('LoadState')}/{after.get('ActiveState')} ({how})"
    )
    return StopResult(was_live=was_live, stopped=gone, detail=detail)


def notifier_unit_text(python: str) -> str:
    """The ``fleet-notify@.service`` template every unit's ``OnFailure=`` points at (D3 property 4).

    It must always exit 0: a failing notifier would trigger its own OnFailure and recurse. Two
    layers make sure: the ``-`` prefix (systemd counts any exit status as success) and ``|| true``.
    """
    if not _SAFE_PYTHON.match(python):
        raise ValueError(f"python path {python!r} must be a plain path (no spaces or quotes)")
    return (
        "[Unit]\n"
        "Description=fleet: alarm for the failed unit %i\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"ExecStart=-/bin/sh -c '{python} -m fleet.units notify %i || true'\n"
    )


def notifier_install_command(python: str) -> str:
    """Write the template into the master's user unit directory and reload the user manager."""
    text = shlex.quote(notifier_unit_text(python))
    return (
        'd="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"; mkdir -p "$d" && '
        f"printf '%s' {text} > \"$d/{NOTIFIER_TEMPLATE}\" && systemctl --user daemon-reload"
    )


class SystemdSupervisor:
    """Units under one master's systemd user manager on one worker.

    ``notifier``: the OnFailure unit, e.g. :data:`NOTIFIER_TEMPLATE` (installed with
    :func:`notifier_install_command`); a template gets the unit's name as its instance.
    """

    kind = SupervisorKind.SYSTEMD

    def __init__(
        self, transport: Transport, *, worker: str, master: str, notifier: str | None = None
    ) -> None:
        self.transport = transport
        self.worker = worker
        self.master = master
        self.notifier = notifier

    def probe(self) -> tuple[Unit, ...]:
        result = self.transport.run(build_probe_command(), timeout=PROBE_TIMEOUT_S)
        return parse_probe(result, worker=self.worker, master=self.master)

    def start(
        self,
        issue: int,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        max_run_s: int,
        cwd: str | None = None,
    ) -> Claim:
        command = build_start_command(
            issue=issue, argv=argv, env=env, max_run_s=max_run_s, cwd=cwd, notifier=self.notifier
        )
        result = self.transport.run(command, timeout=START_TIMEOUT_S)
        return parse_start(result, issue=issue, worker=self.worker, master=self.master)

    def stop(self, issue: int, *, timeout_s: float = 20.0) -> StopResult:
        command = build_stop_command(issue, timeout_s)
        result = self.transport.run(command, timeout=timeout_s + KILL_WAIT_S + STOP_OVERHEAD_S)
        return parse_stop(result, issue=issue, worker=self.worker)

    def __repr__(self) -> str:
        return f"SystemdSupervisor({self.worker}, {self.master})"
