"""The retry gate: retry only on a four-fact conjunction (D7).

Retry fires when the run *provably did nothing, for a provably transient reason, and produced no
side effects* — never on "it failed". Three of the four facts are ones the agent cannot author:

1. ``transient_signature`` — the capture carries a 429, a 5xx (529 "overloaded" included) or a
   network failure. Deliberately narrow: a bare "timeout"/"timed out" is *not* transient, because a
   false "transient" re-runs a genuine defect three times and buries its cause.
2. ``not_quota`` — no capacity signal (:mod:`fleet.runner.capacity`): a hard provider limit is a
   capacity event for the worker, not a blip for this run (D8).
3. ``never_started`` — the capture proves zero turns: no result envelope, or ``num_turns == 0``. A
   garbled capture proves nothing, so it does not count (:attr:`Capture.zero_turns` is None).
4. ``no_artifact`` — the forge reports no artifact for this issue.

The capture is the same :class:`~fleet.runner.envelope.Capture` the close-out reads, parsed once,
so the gate and the outcome cannot disagree about whether the run started (run step 7). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fleet.runner.capacity import LimitSignal
from fleet.runner.envelope import Reading

# The agent CLI's own retry ladder before it gives up (docs/facts.md: 10 retries,
# min(0.5 s * 2^(n-1), 32 s) + up to 25 % jitter, Retry-After honoured): about 160-200 s of
# waiting. A fleet backoff shorter than the top of that range re-enters the degraded window the CLI
# already spent minutes losing to (D7); :func:`backoff_warning` flags such a ladder.
CLI_RETRY_WINDOW_S = 200

_STATUS_WORDS = (
    r"too\s+many\s+requests|overloaded|internal\s+server\s+error|bad\s+gateway"
    r"|service\s+unavailable|gateway\s+time-?out"
)
_TRANSIENT = re.compile(
    # A status code only where the text says it is one: "API Error: 529", "HTTP 503",
    # "status 429", "api_error_status": 429 — never a bare number, which could be a line number.
    r"\b(?:api[\s_]error(?:[\s_]status)?|http(?:/[\d.]+)?|status(?:[\s_]code)?|error[\s_]status)\W{0,4}"
    r"(?:429|5\d\d)\b"
    rf"|\b(?:429|5\d\d)\s+(?:{_STATUS_WORDS})"
    r"|\boverloaded(?:_error)?\b"
    r"|\bconnection\s+(?:reset|refused)\b"
    r"|\b(?:ECONNRESET|ECONNREFUSED|ENOTFOUND|EAI_AGAIN)\b"
    r"|\bnetwork\s+error\b|\bsocket\s+hang\s+up\b|\bfetch\s+failed\b",
    re.IGNORECASE,
)

FACTS = ("transient_signature", "not_quota", "never_started", "no_artifact")

_WHY_FALSE = {
    "transient_signature": "no transient signature (429, 5xx, network) in the output",
    "not_quota": "a provider limit is a capacity event, not a blip",
    "never_started": "the run may have consumed turns (an envelope with turns, or a garbled one)",
    "no_artifact": "the forge already holds an artifact for this issue",
}


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay_s: int | None  # seconds to wait before the retry; None when not retrying
    reason: str
    facts: tuple[tuple[str, bool], ...]  # the four facts, in D7's order


def transient_signature(output: str) -> str | None:
    """The first transient failure text in ``output``, or None."""
    m = _TRANSIENT.search(output)
    return m[0] if m else None


def decide_retry(
    *,
    capture: Reading,
    output: str,
    exit_code: int,
    limit: LimitSignal | None,
    artifact_found: bool,
    retries_so_far: int,
    backoffs_s: Sequence[int],
) -> RetryDecision:
    """Retry iff all four facts hold and the ladder has a rung left; the delay is that rung.

    A zero exit never retries: the agent said it finished, so "it failed transiently" is not what
    happened, whatever its chatter contains.
    """
    status = capture.api_error_status
    signature = transient_signature(output) or (
        f"api_error_status={status}"
        if status is not None and (status == 429 or status >= 500)
        else None
    )
    values = (
        signature is not None and exit_code != 0,
        limit is None,
        capture.zero_turns is True,
        not artifact_found,
    )
    facts = tuple(zip(FACTS, values, strict=True))
    for name, value in facts:
        if not value:
            why = _WHY_FALSE[name]
            if name == "transient_signature" and signature is not None:
                why = "the agent exited 0"
            return RetryDecision(False, None, f"no retry: {name} is false — {why}", facts)
    if retries_so_far >= len(backoffs_s):
        return RetryDecision(
            False,
            None,
            f"no retry: retries exhausted ({retries_so_far} of {len(backoffs_s)})",
            facts,
        )
    delay = int(backoffs_s[retries_so_far])
    return RetryDecision(
        True,
        delay,
        f"retry {retries_so_far + 1} of {len(backoffs_s)} in {delay}s: "
        f"never started, transient ({signature})",
        facts,
    )


def backoff_warning(backoffs_s: Sequence[int]) -> str | None:
    """A warning when the first gap is shorter than the CLI's own retry window (D7), else None."""
    if backoffs_s and backoffs_s[0] < CLI_RETRY_WINDOW_S:
        return (
            f"first retry backoff {backoffs_s[0]}s is shorter than the agent CLI's own retry "
            f"window (~{CLI_RETRY_WINDOW_S}s): a retry re-enters the same degraded window"
        )
    return None
