"""Which CLI an agent command is: the :class:`AgentKind` names, and :func:`detect_kind`, which
reads a command's program. The inventory needs only this as it loads, in every command, so it
stands apart from the adapters (``fleet.agentkinds.adapters``), which read a run's output in the
close-out and import the envelope and capacity parsers to do it."""

from __future__ import annotations

import os
import re
import shlex
from enum import StrEnum


class AgentKind(StrEnum):
    CLAUDE = "claude"
    CODEX = "codex"
    GEMINI = "gemini"
    PLAIN = "plain"


# The stand-in agent speaks a kind given by ``--kind`` (default claude, today's envelope).
_DEMO = "fleet.agents.demo"
_DURATION = re.compile(r"\d+(?:\.\d+)?[smhd]?")
_WRAPPERS = frozenset({"env", "exec", "nice", "nohup", "timeout", "stdbuf", "npx"})


def command_words(command: str) -> list[str]:
    """The command's words as the shell splits them (split on blanks when it would not)."""
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
    words = command_words(command)
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
