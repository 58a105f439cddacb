"""OpenAI Codex CLI: ``codex exec --json`` prints one JSON event per line (docs/facts.md).

Events: ``thread.started``, ``turn.started``, ``turn.completed`` (``usage``: ``input_tokens``,
``cached_input_tokens``, ``output_tokens``), ``turn.failed`` (``error.message``), ``item.started`` /
``item.updated`` / ``item.completed`` (``item``: agent message, reasoning, command execution, file
change, MCP tool call, web search, todo list) and a top-level ``error`` (``message``).

* Turns: each ``turn.completed``, plus each ``turn.failed`` after which items had already run (the
  model acted in it), plus a turn that acted and never ended (the CLI died). No turn in which an
  item ran is the proof of zero turns (D7); an event cut off before any turn proves nothing.
* Final message: the text of the last completed ``agent_message`` item.
* Errors: the exec stream carries an error's *message only* — no status, no code (the published
  event types; openai/codex issue 22570 asks for a structured one). No usage-limit or
  authentication text is documented, so none is recognised: every failure is ``other``, except one
  before the first turn whose message carries D7's transient signature (``overloaded``). A Codex
  limit therefore does not darken the worker; docs/agents.md says so.
* Max turns: ``codex exec`` documents no such flag, so none is passed.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.agentkinds.kind import AgentKind
from fleet.agentkinds.report import AgentReport, ErrorClass, clip, json_reader
from fleet.runner.envelope import CaptureKind
from fleet.runner.retry import transient_signature

KIND = AgentKind.CODEX
# An event that started printing and was cut off: the stream may have lost a turn.
_CUT_EVENT = re.compile(r'\{\s*"type"\s*:\s*"(?:turn|item|thread)\.')


def turn_flags(max_turns: int) -> tuple[str, ...]:
    del max_turns  # documented nowhere for `codex exec`: the run-time limit bounds it instead
    return ()


def _events(objects: list[tuple[int, int, Any]]) -> list[dict[str, Any]]:
    return [o for _s, _e, o in objects if isinstance(o, dict) and isinstance(o.get("type"), str)]


def _error_text(event: dict[str, Any]) -> str:
    err = event.get("error")
    err_message = err.get("message") if isinstance(err, dict) else None
    if isinstance(err_message, str):
        return err_message
    message = event.get("message")
    return message if isinstance(message, str) else ""


def _usage(event: dict[str, Any]) -> int:
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return 0
    keys = ("input_tokens", "output_tokens")
    return sum(v for k in keys if isinstance(v := usage.get(k), int) and not isinstance(v, bool))


class _Tally:
    """One pass over the events: turns, items, the last message, tokens and errors."""

    def __init__(self) -> None:
        self.turns = self.items_in_turn = self.tokens = 0
        self.started = False
        self.message = ""
        self.errors: list[str] = []

    def add(self, e: dict[str, Any]) -> None:
        kind = e["type"]
        if kind == "turn.started":
            self.started, self.items_in_turn = True, 0
        elif kind == "turn.completed":
            self.turns += 1
            self.tokens += _usage(e)
            self.items_in_turn = 0
        elif kind == "turn.failed":
            self.turns += 1 if self.items_in_turn else 0
            self.items_in_turn = 0
            self.errors.append(_error_text(e))
        elif kind == "error":
            self.errors.append(_error_text(e))
        elif kind.startswith("item."):
            self.items_in_turn += 1
            item = e.get("item")
            if (
                kind == "item.completed"
                and isinstance(item, dict)
                and item.get("type") in ("agent_message", "assistant_message")
                and isinstance(item.get("text"), str)
            ):
                self.message = item["text"]


def _read_objects(
    objects: list[tuple[int, int, Any]], gaps: list[str], exit_code: int | None
) -> AgentReport:
    """The one reading of a ``codex exec --json`` run's merged stdout+stderr."""
    tally = _Tally()
    for event in _events(objects):
        tally.add(event)
    if tally.started and tally.items_in_turn:  # a turn that acted and never ended (a crash)
        tally.turns += 1
    cut = any(_CUT_EVENT.search(gap) for gap in gaps)
    zero = tally.turns == 0
    if cut and tally.turns == 0:
        kind, turns = CaptureKind.GARBLED, None  # a lost event may have been a turn
    elif zero and not cut:
        kind, turns = CaptureKind.NO_ENVELOPE, 0
    else:
        kind, turns = CaptureKind.ENVELOPE, tally.turns  # a cut event cannot undo a turn seen
    failed = bool(tally.errors) or exit_code not in (0, None)
    error, evidence = ErrorClass.NONE, ""
    if failed:
        said = "; ".join(t for t in tally.errors if t) or f"exit {exit_code}"
        signature = transient_signature(said) if turns == 0 else None
        error = ErrorClass.OVERLOADED if signature else ErrorClass.OTHER
        evidence = clip(said)
    detail = (
        f"codex events: {len(objects)} object(s), turns={turns}, "
        f"errors={len(tally.errors)}" + (", an event cut off" if cut else "")
    )
    return AgentReport(
        agent=KIND,
        kind=kind,
        turns=turns,
        final_message=tally.message,
        cost_usd=None,
        tokens=tally.tokens or None,
        error=error,
        reset_at=None,
        evidence=evidence,
        detail=detail,
        is_error=failed,
    )


# Codex states no reset time, so its reading needs no clock.
read = json_reader(KIND, _read_objects)
