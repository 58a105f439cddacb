"""Agent kinds: one adapter per CLI, each turning a run's output into ONE :class:`AgentReport`.

``agent:`` in the inventory stays the command line; ``agent_kind:`` selects the adapter, and when
it is absent :func:`detect_kind` reads the command's first word (with a warning when it cannot
tell). The close-out (``fleet/runner/closeout.py``) reads only the report, so every kind gets the
same D7 retry gate, D8 capacity file, D16 zero-turn rule and D17 results file.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fleet.agentkinds import claude, codex, gemini, plain
from fleet.agentkinds.report import AgentKind, AgentReport, ErrorClass

__all__ = ["ADAPTERS", "Adapter", "AgentKind", "AgentReport", "ErrorClass", "detect_kind"]


@dataclass(frozen=True)
class Adapter:
    kind: AgentKind
    read: Callable[[str, int | None, datetime], AgentReport]
    turn_flags: Callable[[int], tuple[str, ...]]  # the CLI's own max-turns flag, if it has one


ADAPTERS: dict[AgentKind, Adapter] = {
    m.KIND: Adapter(m.KIND, m.read, m.turn_flags) for m in (claude, codex, gemini, plain)
}

# The stand-in agent speaks a kind given by ``--kind`` (default claude, today's envelope).
_DEMO = "fleet.agents.demo"
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhd]?")
_WRAPPERS = frozenset({"env", "exec", "nice", "nohup", "timeout", "stdbuf", "npx"})


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _demo_kind(words: list[str]) -> AgentKind:
    for i, word in enumerate(words):
        if word == "--kind" and i + 1 < len(words):
            return AgentKind(words[i + 1]) if words[i + 1] in set(AgentKind) else AgentKind.CLAUDE
        if word.startswith("--kind="):
            value = word.split("=", 1)[1]
            return AgentKind(value) if value in set(AgentKind) else AgentKind.CLAUDE
    return AgentKind.CLAUDE


def detect_kind(command: str) -> tuple[AgentKind, str | None]:
    """The kind named by ``command``'s program (its first word, past ``env VAR=…`` and the usual
    wrappers), or ``plain`` with a warning saying why. Pure."""
    words = _words(command)
    if _DEMO in words:
        return _demo_kind(words), None
    program = next(
        (
            w
            for w in words
            if "=" not in w
            and not w.startswith("-")
            and w not in _WRAPPERS
            and not _DURATION.fullmatch(w)  # `timeout 3000 claude`, `nice 10 …`
        ),
        "",
    )
    name = os.path.basename(program)
    for kind in (AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.GEMINI):
        if name == kind.value:
            return kind, None
    return AgentKind.PLAIN, (
        f"agent command {command!r}: its program {name or '(none)'!r} is not claude, codex or "
        "gemini, so it runs as agent_kind: plain (exit code and results file only); set agent_kind "
        "to say so, or to name the CLI it wraps"
    )


def with_turn_flags(command: str, kind: AgentKind, max_turns: int | None) -> str:
    """``command`` with the CLI's own max-turns flag appended (D13), unless it already has one or
    the CLI has none. The number is an int from the inventory, so nothing here needs quoting."""
    if max_turns is None:
        return command
    flags = ADAPTERS[kind].turn_flags(max_turns)
    if not flags or flags[0] in _words(command):
        return command
    return f"{command} {' '.join(flags)}"
