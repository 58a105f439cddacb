"""One adapter per agent CLI, by kind: how its output is read into an :class:`AgentReport` and
the CLI's own max-turns flag. The close-out (``fleet/runner/closeout.py``) and the unit's command
line (``fleet/runner/turns.py``) use these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fleet.agentkinds import claude, codex, gemini, plain
from fleet.agentkinds.kind import AgentKind, command_words
from fleet.agentkinds.report import AgentReport


@dataclass(frozen=True)
class Adapter:
    kind: AgentKind
    read: Callable[[str, int | None, datetime], AgentReport]
    turn_flags: Callable[[int], tuple[str, ...]]  # the CLI's own max-turns flag, if it has one


ADAPTERS: dict[AgentKind, Adapter] = {
    m.KIND: Adapter(m.KIND, m.read, m.turn_flags) for m in (claude, codex, gemini, plain)
}


def with_turn_flags(command: str, kind: AgentKind, max_turns: int | None) -> str:
    """``command`` with the CLI's own max-turns flag appended (D13), unless it already has one or
    the CLI has none. The number is an int from the inventory, so nothing here needs quoting."""
    if max_turns is None:
        return command
    flags = ADAPTERS[kind].turn_flags(max_turns)
    if not flags or flags[0] in command_words(command):
        return command
    return f"{command} {' '.join(flags)}"
