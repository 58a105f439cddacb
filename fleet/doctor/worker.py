"""The doctor's one round trip per worker: a shell script that always exits 0 and prints one
``fleet-doctor:`` line per check, and its parser. Pure (builders and parsers only).

The script runs through the worker's transport, whose PATH repair (check 0) is the PATH every unit
is given (D3), so "the agent is on PATH" here means on the unit's PATH, not the login shell's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from fleet.core.model import SupervisorKind
from fleet.doctor.model import Finding, failed, passed
from fleet.transport import remote_path

MARK = "fleet-doctor:"
# Free space the worker's state_dir needs for per-run worktrees and their build output. An
# estimate, not a measurement: a worktree is one checkout of the target (this repository's is
# ~10 MB) plus what the agent builds; 1 GiB holds tens of runs of a small target. Raise it for a
# large one.
MIN_FREE_KB = 1024 * 1024
# git ls-remote against a clone's origin: a reachable remote answers in well under a second on a
# LAN; 20 s tells "slow" from "not there" without holding the doctor for long.
LS_REMOTE_TIMEOUT_S = 20


@dataclass(frozen=True)
class WorkerFacts:
    """What the script needs to know about one worker (from the inventory)."""

    name: str
    supervisor: SupervisorKind  # SYSTEMD or PORTABLE (as detected)
    agent: str
    clone: str
    runner_clone: str | None
    runner_remote: str | None
    state_dir: str
    python: str
    token_file: str | None  # checked on GitHub boards only
    origin: str | None = None  # where a missing target clone is cloned from at the first dispatch


class Sh(str):
    """A piece of a finding's detail that the worker's shell expands (ours, never inventory
    text); every other piece is quoted (values from the inventory reach a shell: shlex.quote)."""


def _line(check: str, ok: str, reason: str, *detail: str) -> str:
    """Shell that prints one finding line."""
    words = "".join(part if isinstance(part, Sh) else shlex.quote(part) for part in detail)
    return f"printf '%s\\n' {shlex.quote(f'{MARK}{check}:{ok}:{reason}:')}{words or chr(39) * 2}"


def _git_remote(check: str, clone: str, remote: str, origin: str | None = None) -> str:
    """The clone answers and its remote answers; a missing clone passes when ``origin`` (what the
    first dispatch clones it from, check 9) answers."""
    c = remote_path(clone)
    r = shlex.quote(remote)
    t = LS_REMOTE_TIMEOUT_S
    missing = (
        f"elif timeout {t} git ls-remote --exit-code {shlex.quote(origin)} HEAD >/dev/null 2>&1; "
        f"then {_line(check, 'pass', 'ok', f'{clone} not made yet; the first dispatch clones it from {origin}, which answers')}; "
        if origin
        else ""
    )
    return (
        f"if git -C {c} rev-parse --git-dir >/dev/null 2>&1; then :; "
        f"{missing}"
        f"else {_line(check, 'fail', 'no-clone', f'{clone} is not a git clone')}; fi; "
        f"if ! git -C {c} rev-parse --git-dir >/dev/null 2>&1; then :; "
        f"elif timeout {t} git -C {c} ls-remote --exit-code {r} HEAD >/dev/null 2>&1; then "
        f"{_line(check, 'pass', 'ok', f'{clone} and its remote {remote} answer')}; "
        f"else {_line(check, 'fail', 'remote-unreachable', f'{remote} did not answer git ls-remote from {clone}')}; fi"
    )


def _supervisor(w: WorkerFacts) -> list[str]:
    if w.supervisor == SupervisorKind.SYSTEMD:
        return [
            "if systemctl --user show-environment >/dev/null 2>&1; then "
            + _line("supervisor", "pass", "ok", "systemd user manager answers")
            + "; else "
            + _line("supervisor", "fail", "no-user-manager", "systemctl --user does not answer")
            + "; fi",
            'if [ "$(loginctl show-user "$(id -un)" -p Linger --value 2>/dev/null)" = yes ]; then '
            + _line("lingering", "pass", "ok", "lingering is on for ", Sh('"$(id -un)"'))
            + "; else "
            + _line("lingering", "fail", "no-linger", "lingering is off for ", Sh('"$(id -un)"'))
            + "; fi",
        ]
    # The worker side itself: the package alone proves little, it loads its names on first use.
    code = "import fleet.units.__main__"
    return [
        f"if {shlex.quote(w.python)} -c {shlex.quote(code)} >/dev/null 2>&1; then "
        + _line("supervisor", "pass", "ok", "portable supervisor importable")
        + "; else "
        + _line(
            "supervisor", "fail", "no-portable-supervisor", f"{w.python} cannot import fleet.units"
        )
        + "; fi"
    ]


def _agent(w: WorkerFacts) -> str:
    argv0 = shlex.split(w.agent)[0] if w.agent.strip() else ""
    a = shlex.quote(argv0)
    return (
        f"if command -v -- {a} >/dev/null 2>&1; then "
        + _line("agent", "pass", "ok", f"{argv0} is ", Sh(f'"$(command -v -- {a})"'))
        + "; else "
        + _line(
            "agent", "fail", "agent-not-on-path", f"{argv0} is not on the unit PATH ", Sh('"$PATH"')
        )
        + "; fi"
    )


def _token_file(path: str) -> str:
    f = remote_path(path)
    return (
        f"if [ ! -s {f} ]; then "
        + _line("token file", "fail", "token-file-missing", f"{path} is missing or empty")
        + f'; elif [ "$(stat -c %a {f} 2>/dev/null | cut -c2-)" = 00 ]; then '
        + _line("token file", "pass", "ok", f"{path} is private")
        + "; else "
        + _line(
            "token file",
            "fail",
            "token-file-readable",
            f"{path} has mode ",
            Sh(f'"$(stat -c %a {f})"'),
        )
        + "; fi"
    )


def _disk(state_dir: str) -> str:
    d = remote_path(state_dir)
    free = Sh('"$((free / 1024))"')
    return (
        f"mkdir -p -- {d} 2>/dev/null; free=$(df -Pk -- {d} 2>/dev/null | awk 'NR==2 {{print $4}}'); "
        f'if [ -z "$free" ]; then '
        + _line("disk", "fail", "disk-unknown", f"df could not read {state_dir}")
        + f'; elif [ "$free" -ge {MIN_FREE_KB} ]; then '
        + _line("disk", "pass", "ok", free, " MiB free under " + state_dir)
        + "; else "
        + _line("disk", "fail", "disk-low", free, " MiB free under " + state_dir)
        + "; fi"
    )


def script(w: WorkerFacts) -> str:
    """The whole check script for one worker. Every value is quoted or a fixed word."""
    parts = [*_supervisor(w), _agent(w), _git_remote("target clone", w.clone, "origin", w.origin)]
    if w.runner_clone:
        parts.append(_git_remote("runner clone", w.runner_clone, w.runner_remote or "origin"))
    if w.token_file is not None:
        parts.append(_token_file(w.token_file))
    parts.append(_disk(w.state_dir))
    return "; ".join(parts) + "; exit 0"


FIXES = {
    "no-user-manager": "enable the user manager: `loginctl enable-linger $USER` as root, then log in once",
    "no-linger": "`loginctl enable-linger <master>` (as root): without it the user manager and every unit die at logout",
    "no-portable-supervisor": "install fleet for the worker's `python:` (pip install fleet), or set `python:` to the interpreter that has it",
    "agent-not-on-path": "install the agent CLI, or add its directory to the worker's `path_prefix:` (units get that PATH, not your login shell's)",
    "no-clone": "clone the repository at that path on the worker (`git clone <url> <path>`)",
    "remote-unreachable": "check the clone's remote URL and the master's git credentials (`git -C <clone> ls-remote origin`)",
    "token-file-missing": "install -m 600 the board token at that path on the worker (docs/github.md)",
    "token-file-readable": "`chmod 600` the token file: a readable token is refused, never used",
    "disk-unknown": "check that the state_dir's file system is mounted",
    "disk-low": f"free space under the worker's state_dir (at least {MIN_FREE_KB // 1024} MiB)",
}
EXPECTED = ("supervisor", "agent", "target clone", "disk")


def parse(worker: str, stdout: str, facts: WorkerFacts) -> list[Finding]:
    """The script's lines as findings. A check the script should have printed and did not is a
    failure of its own ("no-answer"): silence is never a pass (seed 003, check 8)."""
    out: list[Finding] = []
    seen = set()
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line.startswith(MARK):
            continue
        fields = line[len(MARK) :].split(":", 3)
        if len(fields) != 4:
            continue
        check, verdict, reason, detail = fields
        seen.add(check)
        name = f"worker {worker}: {check}"
        if verdict == "pass":
            out.append(passed(name, detail))
        else:
            out.append(failed(name, reason, detail, FIXES.get(reason, "see the detail")))
    expected = list(EXPECTED)
    if facts.supervisor == SupervisorKind.SYSTEMD:
        expected.append("lingering")
    if facts.runner_clone:
        expected.append("runner clone")
    if facts.token_file is not None:
        expected.append("token file")
    for check in expected:
        if check not in seen:
            out.append(
                failed(
                    f"worker {worker}: {check}",
                    "no-answer",
                    "the worker's script printed nothing for this check",
                    "run the doctor again; if it persists, ssh in and look",
                )
            )
    return out
