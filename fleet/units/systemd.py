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
from fleet.transport.base import CommandTimeout, TransportError
from fleet.units.base import (
    FINISHED_STATES,
    LIVE_STATES,
    Claim,
    ClaimCode,
    StopResult,
    SupervisorError,
    UnitsParseError,
    UnitStart,
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
# manager is wedged, not busy; each further claim of a batch adds START_EACH_S (a claim measured
# ~26 ms on the harness; 5 s is a wedged manager). probe: one show of the task-* pattern.
START_TIMEOUT_S = 60.0
START_EACH_S = 5.0
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


def _systemd_run_args(s: UnitStart, notifier: str | None) -> list[str]:
    """systemd-run's arguments for one claim (the D3 invocation), validated."""
    check_issue(s.issue)
    check_start_args(s.argv, s.env, s.max_run_s)
    name = unit_name(s.issue)
    run = ["--user", "--quiet", f"--unit={name}", "--collect", "-p", "Type=exec"]
    run += ["-p", f"RuntimeMaxSec={s.max_run_s}"]
    if notifier:
        run += ["-p", f"OnFailure={on_failure_unit(notifier, name)}"]
    run += [f"--setenv={key}={value}" for key, value in s.env.items()]
    if s.cwd:
        run.append(f"--working-directory={s.cwd}")
    return [*run, "--", *s.argv]


# One claim, as a shell function: ``fleet_claim N ARGS...`` prints a ``begin`` mark, runs
# ``systemd-run ARGS`` (its words, stderr included, are that section's body), prints the ``start``
# mark with its exit code and, only on a refusal, the unit's state (a launch needs no second
# systemctl: ``Type=exec`` exit 0 is the exec done, and the probe reads the start time).
#
# A start refused because the name was taken, whose unit then shows ``not-found``, is tried once
# more: systemd refuses a name in the instant it collects the unit that held it ("was already
# loaded", "already exists" in older versions), and by the show the name is free; read as it
# stood, that is a supervisor failure (43) for a free name. Only that refusal: a start whose
# command could not be executed also leaves its unit collected, and a second try would run the
# failed exec and its OnFailure alarm twice. The words only choose whether to try again; the answer
# is still classified by exit code and state, and words this does not know leave the refusal as
# it stood (43, cannot-classify: no duplicate either way). A second refusal stays one. Under the
# fleet lock, so the retry races no other dispatcher. N is an issue number (check_issue), so it
# needs no quoting.
_CLAIM_FUNCTION = (
    "fleet_claim() { n=$1; shift; "
    f'echo "{MARK} begin_$n rc=0"; out=$(systemd-run "$@" 2>&1); rc=$?; printf "%s\\n" "$out"; '
    'case $out in *"already loaded"*|*"already exists"*) taken=1;; *) taken=0;; esac; '
    'if [ "$rc" -ne 0 ] && [ "$taken" = 1 ] && [ "$(systemctl --user show -p LoadState --value '
    '"task-$n.service" 2>/dev/null)" = not-found ]; then systemd-run "$@" 2>&1; rc=$?; fi; '
    f'echo; echo "{MARK} start_$n rc=$rc"; '
    f'if [ "$rc" -ne 0 ]; then {show_command(chr(34) + "task-$n.service" + chr(34))}; fi; }}'
)
# A remote command is one argument of ``sh -c``: Linux refuses a single argument over 128 KiB
# (MAX_ARG_STRLEN). A batch of claims is cut into commands of at most this many bytes; a claim
# is ~0.5 KiB with the runner's argv and environment, so ~100 claims a command.
MAX_COMMAND_BYTES = 64 * 1024


def build_start_command(
    *,
    issue: int,
    argv: Sequence[str],
    env: Mapping[str, str],
    max_run_s: int,
    cwd: str | None = None,
    notifier: str | None = None,
) -> str:
    """One claim's command."""
    start = UnitStart(issue, tuple(argv), env, max_run_s, cwd)
    ((command, _),) = build_starts_commands([start], notifier)
    return command


def build_starts_commands(
    starts: Sequence[UnitStart], notifier: str | None = None
) -> list[tuple[str, Sequence[UnitStart]]]:
    """Several claims of one master as few remote commands as fit :data:`MAX_COMMAND_BYTES`, each
    with the claims it carries, run one after another with their own marks: one SSH session and
    one shell for many claims."""
    out: list[tuple[str, Sequence[UnitStart]]] = []
    lines: list[str] = [_CLAIM_FUNCTION]
    head = len(_CLAIM_FUNCTION.encode())
    size, first = head, 0
    for i, s in enumerate(starts):
        line = shlex.join(["fleet_claim", str(s.issue), *_systemd_run_args(s, notifier)])
        length = len(line.encode())  # the kernel's limit is in bytes: a non-ASCII path is several
        if i > first and size + 1 + length > MAX_COMMAND_BYTES:
            out.append(("\n".join(lines), starts[first:i]))
            lines, size, first = [_CLAIM_FUNCTION], head, i
        lines.append(line)
        size += 1 + length
    if len(lines) > 1:
        out.append(("\n".join(lines), starts[first:]))
    return out


def build_probe_command() -> str:
    """Every ``task-*`` service this master's manager has loaded (live or lingering), with its
    state, from ONE ``systemctl show`` of the pattern: a listing and then a show of the names is
    two processes and two passes of the manager for the same set."""
    return (
        f"out=$({show_command(shlex.quote('task-*.service'))} 2>&1); rc=$?; "
        f'echo "{MARK} show rc=$rc"; printf \'%s\\n\' "$out"'
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


def _answer(
    sections: Mapping[str, tuple[int, str]], s: UnitStart, *, worker: str, master: str
) -> Claim:
    """One claim's answer from its ``start`` section (present: the caller checked)."""
    rc, body = sections[f"start_{s.issue}"]
    props = (parse_show(body) or [{}])[0]
    code = classify_start(rc, props)
    if code is ClaimCode.LAUNCHED:
        live = Unit(issue=s.issue, worker=worker, master=master, state="active", start_us=0)
        return Claim(code, live, f"{unit_name(s.issue)} started (systemd-run exit 0)")
    unit = unit_from_props(props, worker=worker, master=master)
    state = f"{props.get('LoadState', '?')}/{props.get('ActiveState', '?')}"
    if code is ClaimCode.SUPERVISOR_FAILED or unit is None or unit.issue != s.issue:
        said = sections.get(f"begin_{s.issue}", (0, ""))[1].strip()[-500:]
        why = f"systemd-run exit {rc}, unit {state}: {said}"
        return Claim(ClaimCode.SUPERVISOR_FAILED, None, why)
    return Claim(code, unit, f"{unit_name(s.issue)} {state} (systemd-run exit {rc})")


def parse_starts(
    result: RunResult, starts: Sequence[UnitStart], *, worker: str, master: str, whole: bool = True
) -> list[Claim | None]:
    """Each claim's answer, read from its own marks (D20):

    * a ``start`` mark: classified by systemd-run's exit code and the unit's state, never stderr;
    * a ``begin`` mark and no ``start`` mark: systemd-run may have run: ``None``, the unit may be
      live and only the next probe can say;
    * no ``begin`` mark: the claim was never tried (the command died before it): a supervisor
      failure, the name untouched; unless the output is not ``whole`` (a command cut short by a
      timeout may still be running on the worker): then ``None`` too."""
    sections = split_sections(result.stdout)
    tail = result.stderr.strip()[-500:]
    out: list[Claim | None] = []
    for s in starts:
        if f"start_{s.issue}" in sections:
            out.append(_answer(sections, s, worker=worker, master=master))
        elif f"begin_{s.issue}" in sections or not whole:
            out.append(None)
        else:
            why = f"no answer from systemd-run (exit {result.exit}): {tail}"
            out.append(Claim(ClaimCode.SUPERVISOR_FAILED, None, why))
    return out


def parse_start(result: RunResult, *, issue: int, worker: str, master: str) -> Claim:
    """One claim's answer; an answer lost after systemd-run began reads as a supervisor failure
    here (:meth:`SystemdSupervisor.start` raises instead, so a dispatcher reads it unconfirmed)."""
    stub = UnitStart(issue, ("-",), {"PATH": "-"}, 1)
    claim = parse_starts(result, [stub], worker=worker, master=master)[0]
    if claim is None:
        why = f"systemd-run began and gave no answer (exit {result.exit})"
        return Claim(ClaimCode.SUPERVISOR_FAILED, None, why)
    return claim


def parse_probe(result: RunResult, *, worker: str, master: str) -> tuple[Unit, ...]:
    sections = split_sections(result.stdout)
    if "show" not in sections:
        raise SupervisorError(
            f"systemd probe on {worker}: no answer: {result.stderr.strip()[-500:]}"
        )
    rc, body = sections["show"]
    if rc != 0:
        raise SupervisorError(f"systemd probe on {worker}: show exit {rc}: {body.strip()[-500:]}")
    blocks = parse_show(body)
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
        (claim,) = self.start_many([UnitStart(issue, tuple(argv), env, max_run_s, cwd)])
        if claim is None:
            raise TransportError(f"{self.worker}: systemd-run began and its answer was lost")
        return claim

    def start_many(self, starts: Sequence[UnitStart]) -> list[Claim | None]:
        if not starts:
            return []
        answers: list[Claim | None] = []
        for command, chunk in build_starts_commands(starts, self.notifier):
            try:
                answers += self._claims(command, chunk)
            except TransportError as exc:
                if not answers:
                    raise  # nothing answered: the caller reads every claim as lost, with why
                # Earlier commands answered and keep their answers (launches among them); this
                # one may have begun (None: the next probe tells); the rest were never sent.
                answers += [None] * len(chunk)
                why = f"not tried: an earlier command of the batch failed: {exc}"
                answers += [Claim(ClaimCode.SUPERVISOR_FAILED, None, why)] * (
                    len(starts) - len(answers)
                )
                break
        return answers

    def _claims(self, command: str, starts: Sequence[UnitStart]) -> list[Claim | None]:
        """One remote command's claims; a round trip cut short answers what its output says."""
        timeout = START_TIMEOUT_S + START_EACH_S * (len(starts) - 1)
        try:
            result = self.transport.run(command, timeout=timeout)
        except CommandTimeout as exc:
            if exc.partial is None:
                raise
            return parse_starts(
                exc.partial, starts, worker=self.worker, master=self.master, whole=False
            )
        return parse_starts(result, starts, worker=self.worker, master=self.master)

    def stop(self, issue: int, *, timeout_s: float = 20.0) -> StopResult:
        command = build_stop_command(issue, timeout_s)
        result = self.transport.run(command, timeout=timeout_s + KILL_WAIT_S + STOP_OVERHEAD_S)
        return parse_stop(result, issue=issue, worker=self.worker)

    def __repr__(self) -> str:
        return f"SystemdSupervisor({self.worker}, {self.master})"
