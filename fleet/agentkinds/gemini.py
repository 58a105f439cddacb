"""Gemini CLI: ``gemini -p … --output-format json`` prints ONE object ``{response, stats, error?}``.

Exit codes (published): 0 success, 1 general error or API failure, 42 input error, 53 turn limit
exceeded.

* Turns: the model requests the run made, summed over ``stats.models.<model>.api.totalRequests``;
  without that field the turns are unknown (never zero). No object at all with a non-zero exit is
  the proof the model was never reached.
* Final message: ``response``. Tokens: ``stats.models.<model>.tokens.total``, summed.
* Errors: ``error`` is documented as "error details" with no fixed texts or codes, so no message is
  recognised as a usage limit or a revocation: every failure is ``other`` (exit 53 is named in the
  evidence as the turn limit), and a Gemini limit does not darken the worker; docs/agents.md says so.
* Max turns: the CLI documents a session-turn limit only as a settings-file key, no flag; none is
  passed on the command line.
"""

from __future__ import annotations

import re
from typing import Any

from fleet.agentkinds.kind import AgentKind
from fleet.agentkinds.report import AgentReport, ErrorClass, clip, json_reader
from fleet.runner.envelope import CaptureKind

KIND = AgentKind.GEMINI
EXIT_NAMES = {1: "general error or API failure", 42: "input error", 53: "turn limit exceeded"}
_CUT = re.compile(r'\{\s*"(?:response|stats|error)"\s*:')


def turn_flags(max_turns: int) -> tuple[str, ...]:
    del max_turns  # a settings key (model.maxSessionTurns), not a command-line flag
    return ()


def _ints(values: list[Any]) -> int | None:
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return sum(ints) if ints else None


def _model_stats(obj: dict[str, Any], section: str, key: str) -> int | None:
    stats = obj.get("stats")
    models = stats.get("models") if isinstance(stats, dict) else None
    if not isinstance(models, dict):
        return None
    values = [
        m.get(section, {}).get(key)
        for m in models.values()
        if isinstance(m, dict) and isinstance(m.get(section), dict)
    ]
    return _ints(values)


def _result(objects: list[tuple[int, int, Any]]) -> dict[str, Any] | None:
    for _s, _e, o in reversed(objects):
        if isinstance(o, dict) and ("response" in o or "error" in o) and "type" not in o:
            return o
    return None


def _error_text(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        parts = [f"{k}={err[k]}" for k in ("type", "code", "message") if k in err]
        return " ".join(str(p) for p in parts)
    return "" if err is None else str(err)


def _read_objects(
    objects: list[tuple[int, int, Any]], gaps: list[str], exit_code: int | None
) -> AgentReport:
    """The one reading of a Gemini CLI headless run's merged stdout+stderr."""
    obj = _result(objects)
    exit_name = EXIT_NAMES.get(exit_code or 0, "")
    if obj is None:
        cut = any(_CUT.search(g) for g in gaps)
        kind = CaptureKind.GARBLED if cut else CaptureKind.NO_ENVELOPE
        turns = None if cut or exit_code == 0 else 0
        failed = exit_code not in (0, None)
        return AgentReport(
            KIND, kind, turns, "", None, None, ErrorClass.OTHER if failed else ErrorClass.NONE,
            None, f"exit {exit_code} {exit_name}".strip() if failed else "",
            "gemini: the JSON result is cut off" if cut else "gemini: no JSON result", failed,
        )  # fmt: skip
    response = obj.get("response")
    said = _error_text(obj)
    failed = bool(said) or exit_code not in (0, None)
    evidence = clip(f"exit {exit_code} {exit_name}: {said}".strip(" :")) if failed else ""
    turns = _model_stats(obj, "api", "totalRequests")
    return AgentReport(
        agent=KIND,
        kind=CaptureKind.ENVELOPE,
        turns=turns,
        final_message=response if isinstance(response, str) else "",
        cost_usd=None,
        tokens=_model_stats(obj, "tokens", "total"),
        error=ErrorClass.OTHER if failed else ErrorClass.NONE,
        reset_at=None,
        evidence=evidence,
        detail=f"gemini result: turns={turns} exit={exit_code}"
        + (f" error: {said}" if said else ""),
        is_error=failed,
    )


# Gemini states no reset time, so its reading needs no clock.
read = json_reader(KIND, _read_objects)
