"""Shell snippets: pure builders of what a worker is asked to run (pre-flight check 0's PATH
repair, check 8's three-token reach probe) and the parser of check 8's answer. Every value they
put into a command is quoted with ``shlex.quote``."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from fleet.core.model import Reach
from fleet.transport.base import RunResult, Transport, TransportError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def shell_path(path: str) -> str:
    """Render ``path`` as one shell word: quoted, with a leading ``~`` left for the shell to expand.

    ``~/x`` becomes ``"$HOME"/'x'`` because a quoted ``~`` is never expanded, and the directory must
    be the *worker's* home, not the dispatcher's (D3: tools live under the worker's ``~/.local/bin``).
    Only absolute paths and ``~``/``~/...`` are accepted: a relative PATH entry or ``~user`` would
    silently mean something different on every box.
    """
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"/'
    if not path.startswith("/"):
        raise ValueError(f"path {path!r} must be absolute or start with '~/'")
    return shlex.quote(path)


def remote_path(path: str) -> str:
    """A worker-side file path as one shell word: like :func:`shell_path`, except that a relative
    path is allowed and means relative to the master's home, where a non-interactive ssh command
    (and a local command run from home) starts — the inventory's rule for ssh workers' paths."""
    if path == "~" or path.startswith(("~/", "/")):
        return shell_path(path)
    if path.startswith("~"):
        raise ValueError(f"path {path!r}: '~user' means a different home on every box")
    return shlex.quote(path)


def path_repair(prefix: Sequence[str]) -> str:
    """The PATH repair of pre-flight check 0 (D3), as a shell prefix ending in ``export PATH; ``.

    A non-interactive ssh gets a minimal PATH (``jq: command not found``, exit 127), so every
    command a transport sends starts with this. Each directory is an ``if``, never an ``&&`` list:
    under ``set -e`` a failed ``[ -d ]`` in a list exits 1 on every box lacking the directory.
    The first entry of ``prefix`` ends up first on PATH (entries are prepended in reverse).
    An empty prefix repairs nothing and returns ``""``.
    """
    if not prefix:
        return ""
    parts = []
    for directory in reversed(tuple(prefix)):
        word = shell_path(directory)
        parts.append(f'if [ -d {word} ]; then PATH={word}:"$PATH"; fi; ')
    return "".join(parts) + "export PATH; "


def env_exports(env: Mapping[str, str] | None) -> str:
    """``export NAME=value; `` for each entry, values quoted; a bad name is a clear error."""
    if not env:
        return ""
    out = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"environment variable name {name!r} is not a valid shell name")
        out.append(f"export {name}={shlex.quote(value)}; ")
    return "".join(out)


REACH_PREFIX = "fleet-reach:"  # every token line starts with it; nothing else we print does


def reach_token(reach: Reach) -> str:
    """The exact line the worker prints for ``reach`` (UNREACHABLE has no line: it is silence)."""
    if reach is Reach.UNREACHABLE:
        raise ValueError("UNREACHABLE is the absence of a token, it is never printed")
    return REACH_PREFIX + reach.value


_TOKENS = {reach_token(r): r for r in Reach if r is not Reach.UNREACHABLE}


def reach_command(*, state_dir: str, runner_check: str) -> str:
    """Check 8's remote probe: ALWAYS exits 0 and prints exactly one token line, first.

    ssh exits non-zero for its *own* failures too, so the exit status cannot tell "the worker said
    no" from "nothing ran"; the token can. ``no-permission``: ``state_dir`` cannot be created or
    written by this master. ``no-runner``: ``runner_check`` (a shell test command whose values the
    caller quoted, e.g. ``python3 -c 'import fleet.runner'``) fails. The checks' own output is
    discarded so the token is the first line we print; a caller may append its own probe after.
    """
    if not runner_check.strip():
        raise ValueError("runner_check must be a non-empty shell command")
    d = remote_path(state_dir)
    probe = f"{d}/.fleet-reach.$$"
    writable = f"mkdir -p -- {d} && : > {probe} && rm -f -- {probe}"
    return (
        f"if ! {{ {writable}; }} >/dev/null 2>&1; then echo {reach_token(Reach.NO_PERMISSION)}; "
        f"elif ! ( {runner_check}\n) </dev/null >/dev/null 2>&1; then "
        f"echo {reach_token(Reach.NO_RUNNER)}; "
        f"else echo {reach_token(Reach.OK)}; fi; "
    )


_REACH_WHY = {
    Reach.OK: "",
    Reach.NO_PERMISSION: "the state directory cannot be created or written by this master",
    Reach.NO_RUNNER: "the runner check failed on the worker",
}


def parse_reach(result: RunResult | None) -> tuple[Reach, str]:
    """Read check 8's answer. Pure.

    ``None`` (the transport raised) or no token line anywhere in stdout is UNREACHABLE: "no token
    means nothing ran, so no claim may be made" (seed 003, check 8). Lines before the token (a
    motd, a chatty rc file) are tolerated; a token must be a whole line, so an error message that
    merely *mentions* a token is not one. The first token line wins.
    """
    if result is None:
        return Reach.UNREACHABLE, "the transport could not run the probe: nothing ran"
    for line in result.stdout.splitlines():
        reach = _TOKENS.get(line.strip())
        if reach is not None:
            return reach, _REACH_WHY[reach]
    tail = result.stderr.strip().splitlines()
    said = f"; stderr: {tail[-1]}" if tail else ""
    return (
        Reach.UNREACHABLE,
        f"no {REACH_PREFIX} token in the output (exit {result.exit}): nothing ran{said}",
    )


def probe_reach(
    transport: Transport, *, state_dir: str, runner_check: str, timeout: float | None = None
) -> tuple[Reach, str]:
    """Run check 8 through ``transport``; a :class:`TransportError` is UNREACHABLE with its reason."""
    command = reach_command(state_dir=state_dir, runner_check=runner_check)
    try:
        result = transport.run(command, timeout=timeout)
    except TransportError as err:
        return Reach.UNREACHABLE, f"{parse_reach(None)[1]}: {err}"
    return parse_reach(result)
