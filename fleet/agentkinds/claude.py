"""Claude Code: ``claude -p --output-format json`` prints ONE result envelope (docs/facts.md).

Where the signals come from, and nowhere else:

* the envelope's error fields: ``api_error_status`` (401/403: the entitlement is gone; 429 and 5xx:
  transient, D7's signature), ``terminal_reason``/``subtype``/``error`` = ``authentication_failed``;
* a limit reported only as the result text, accepted in exactly its whole-``result`` forms: the
  CLI's ``Claude AI usage limit reached|<epoch>`` (sometimes with ``is_error: false`` and exit 0), and
  the limit phrases (``You've hit your limit · resets 3pm (Europe/Lisbon)``) only when the envelope
  itself says it is an error. A final message that merely *contains* such words is the model's;
* with no envelope at all (the model was never reached, so nothing in the capture is the model's):
  a whole line of a limit phrase with a non-zero exit, and the CLI's own JSON events naming an
  authentication failure. Never a revocation from free text.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from fleet.agentkinds.kind import AgentKind
from fleet.agentkinds.report import AgentReport, ErrorClass, clip, stated_reset
from fleet.runner.capacity import _LIMIT, _reset_from
from fleet.runner.envelope import Capture, CaptureKind, Envelope, json_objects, parse_capture
from fleet.runner.retry import transient_signature

KIND = AgentKind.CLAUDE
_EPOCH_FORM = re.compile(r"Claude AI usage limit reached\|(?P<epoch>\d{9,11})")
_AUTH_GONE = frozenset({401, 403})
_AUTH_WORD = "authentication_failed"


def turn_flags(max_turns: int) -> tuple[str, ...]:
    return ("--max-turns", str(max_turns))


def _tokens(data: dict[str, Any]) -> int | None:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    counts = [usage.get(k) for k in ("input_tokens", "output_tokens")]
    ints = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
    return sum(ints) if ints else None


def _whole_result_limit(
    env: Envelope, now: datetime
) -> tuple[ErrorClass, datetime | None, str] | None:
    text = env.result.strip()
    epoch = _EPOCH_FORM.fullmatch(text)
    said_error = env.is_error or env.api_error_status is not None
    phrase = _LIMIT.fullmatch(text) if said_error and "\n" not in text else None
    if epoch is None and phrase is None:
        return None
    rest = text[text.index("|") :] if epoch is not None else phrase["rest"]  # type: ignore[index]
    reset, note = stated_reset(_reset_from(rest, now), now)
    return ErrorClass.USAGE_LIMIT, reset, clip(f"result={text!r}") + note


def _envelope_error(env: Envelope, now: datetime) -> tuple[ErrorClass, datetime | None, str]:
    status = env.api_error_status
    if status in _AUTH_GONE:
        return (
            ErrorClass.AUTH_REVOKED,
            None,
            clip(f"api_error_status={status} result={env.result!r}"),
        )
    fields = (env.terminal_reason, env.subtype, env.data().get("error"))
    if _AUTH_WORD in fields:
        return ErrorClass.AUTH_REVOKED, None, f"envelope: {_AUTH_WORD}"
    limit = _whole_result_limit(env, now)
    if limit is not None:
        return limit
    if status is not None and (status == 429 or status >= 500) and env.num_turns == 0:
        return ErrorClass.OVERLOADED, None, f"api_error_status={status}"
    if env.is_error or env.subtype.startswith("error") or status is not None:
        why = (
            f"subtype={env.subtype} api_error_status={status} terminal_reason={env.terminal_reason}"
        )
        return ErrorClass.OTHER, None, clip(why)
    return ErrorClass.NONE, None, ""


def _cli_auth_event(obj: object) -> bool:
    """A CLI event (stream-json ``system/api_retry``) naming an authentication failure."""
    if not isinstance(obj, dict):
        return False
    return obj.get("error") == _AUTH_WORD or obj.get("error_status") in _AUTH_GONE


def _before_first_turn(
    output: str, exit_code: int | None, now: datetime
) -> tuple[ErrorClass, datetime | None, str]:
    """No envelope: the model was never reached, so the capture is the CLI's own words."""
    if exit_code == 0:
        return ErrorClass.NONE, None, ""
    scanned = json_objects(output)
    for _start, _end, obj in scanned[0] if scanned is not None else ():
        if _cli_auth_event(obj):
            return ErrorClass.AUTH_REVOKED, None, clip(json.dumps(obj))
    for line in output.splitlines():
        m = _LIMIT.fullmatch(line.strip())
        if m is not None:
            reset, note = stated_reset(_reset_from(m["rest"], now), now)
            return ErrorClass.USAGE_LIMIT, reset, clip(line) + note
    signature = transient_signature(output)
    if signature is not None:
        return ErrorClass.OVERLOADED, None, clip(signature)
    return ErrorClass.OTHER, None, f"exit {exit_code}"


def read(output: str, exit_code: int | None, now: datetime) -> AgentReport:
    """The one reading of a Claude Code run's merged stdout+stderr."""
    cap: Capture = parse_capture(output)
    env = cap.envelope
    if cap.kind is CaptureKind.GARBLED or env is None:
        zero = cap.kind is CaptureKind.NO_ENVELOPE
        error, reset, evidence = (
            _before_first_turn(output, exit_code, now)
            if zero
            else (ErrorClass.OTHER, None, cap.detail)
        )
        return AgentReport(
            KIND, cap.kind, 0 if zero else None, "", None, None, error, reset, evidence,
            cap.detail, error is not ErrorClass.NONE,
        )  # fmt: skip
    error, reset, evidence = _envelope_error(env, now)
    notice = next((clip(ln) for ln in output.splitlines() if _LIMIT.fullmatch(ln.strip())), "")
    return AgentReport(
        agent=KIND,
        kind=cap.kind,
        turns=env.num_turns,
        final_message=env.result,
        cost_usd=env.total_cost_usd,
        tokens=_tokens(env.data()),
        error=error,
        reset_at=reset,
        evidence=evidence,
        detail=cap.detail,
        is_error=env.is_error,
        api_error_status=env.api_error_status,
        notice=notice,
    )
