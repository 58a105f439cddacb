"""D13's max-turns bound for one run: the CLI's own flag where it has one, the runner's where not.

``policy.max_turns`` reaches the agent in one of two ways, decided by the worker's agent kind:

- its adapter names a flag (``fleet/agentkinds``: Claude Code's ``--max-turns``): the flag is added
  to the command line (``with_turn_flags``) and the CLI ends the run itself; the close-out names
  the outcome ``turn-limit`` from the CLI's own error reading;
- it names none (Codex, Gemini, a plain command): the runner watches the capture while the agent
  runs, counts turns with the same adapter that reads the close-out (its ``read`` on the output so
  far), and stops the agent's process group once the count passes the bound — outcome
  ``turn-limit`` again. A kind whose output names no turns until it ends (Gemini's one object, a
  plain agent) cannot be counted live; its run-time limit (``max_run_s``) stays its bound.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fleet.agentkinds import ADAPTERS, AgentKind, with_turn_flags

# How often the runner counts the turns of an agent whose CLI has no flag. One turn of a coding
# agent is a model request plus its tool calls, seconds at the least (not measured here: the
# experiment is the turn timestamps of a Codex event stream), so a 2 s look overshoots the bound by
# about a turn; each look reads the capture once. The bound is a stuck-task cap, not an exact count.
TURN_POLL_S = 2.0


def command_for(agent: str, kind: AgentKind, max_turns: int | None) -> str:
    """The agent's command line, carrying the CLI's own max-turns flag when it has one."""
    return with_turn_flags(agent, kind, max_turns)


def runner_bound(kind: AgentKind, max_turns: int | None) -> int | None:
    """The bound the runner must enforce itself: ``max_turns`` when the CLI has no flag for it."""
    if max_turns is None or ADAPTERS[kind].turn_flags(max_turns):
        return None
    return max_turns


def turns_so_far(log: Path, kind: AgentKind) -> int | None:
    """The turns the capture shows so far, read by the kind's own adapter; None when unknown."""
    try:
        output = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return ADAPTERS[kind].read(output, None, datetime.now(UTC)).turns


def over_bound(turns: int | None, bound: int | None) -> bool:
    """Past the bound: more turns than allowed. Unknown turns are never over (D20)."""
    return bound is not None and turns is not None and turns > bound


__all__ = ["TURN_POLL_S", "command_for", "over_bound", "runner_bound", "turns_so_far"]
