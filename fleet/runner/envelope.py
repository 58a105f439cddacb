"""Find the agent's JSON result envelope in a noisy capture, and parse it exactly once (run step 7).

The runner captures the agent's stdout and stderr merged, so the envelope arrives wrapped in noise:
log lines (some with a stray ``{``), an API error body that is itself JSON, a pretty-printed object,
a truncated tail. A whole-capture ``json.loads`` fails on a *successful* run (D7), so this module
scans for well-formed top-level JSON objects anywhere in the text and keeps the last one whose
``type`` is ``"result"``.

Three outcomes, three names (D20):

* ``ENVELOPE`` — a result envelope was found and its fields have the documented types.
* ``NO_ENVELOPE`` — nothing that is or starts a result envelope. This is D7's proof of zero turns:
  the CLI prints an envelope for every run that reached the model, a first-request failure prints
  none. JSON objects of other types (``{"type":"error",...}`` after ``API Error: 529``, stream-json
  events) are noise, not an envelope: a failed call's error *body* is JSON too (D5's type check).
* ``GARBLED`` — something result-shaped was there but cannot be read: a result object with wrong
  field types, or a result object cut off mid-print. Turns are then *unknown*, not zero — a function
  that could not check says so (ARCHITECTURE, D20) — so a garbled capture never licenses a retry.

The one parse feeds both the retry gate and the close-out, so the two cannot disagree (D7, step 7).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

_DECODER = json.JSONDecoder()

# A result object that started printing but never finished: the envelope was cut off (killed
# mid-write, a full pipe). Searched only in the text between complete top-level objects.
_RESULT_FRAGMENT = re.compile(r'"type"\s*:\s*"result"')

# Where a JSON object can start: "{" then a key or "}". A brace followed by anything else is log
# noise and is skipped without a parse attempt.
_OPENING = re.compile(r'\{\s*["}]')

# How much of an offending value a detail line quotes: enough to recognise, short enough for a log.
_DETAIL_CHARS = 120


class CaptureKind(StrEnum):
    ENVELOPE = "envelope"
    NO_ENVELOPE = "no-envelope"
    GARBLED = "garbled"
    NOT_PARSED = "not-parsed"  # an agent kind whose output is not read at all (``plain``)


@dataclass(frozen=True)
class Envelope:
    """The fields of a result envelope that fleet branches on (docs/facts.md).

    ``raw`` is the whole object re-serialised with sorted keys: a string keeps the value frozen and
    hashable, and :meth:`data` gives a fresh dict to anyone who needs a field not modelled here.
    """

    subtype: str
    is_error: bool
    num_turns: int | None  # None: the envelope did not say, which proves nothing either way (D20)
    result: str
    api_error_status: int | None
    terminal_reason: str | None
    session_id: str | None
    total_cost_usd: float | None
    raw: str

    @property
    def turns_consumed(self) -> int | None:
        return self.num_turns

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.raw)
        return data


class Reading(Protocol):
    """What the retry gate and the outcome read of a run's output: a :class:`Capture` for the
    Claude envelope, an ``AgentReport`` (``fleet.agentkinds``) for every kind."""

    @property
    def kind(self) -> CaptureKind: ...
    @property
    def detail(self) -> str: ...
    @property
    def zero_turns(self) -> bool | None: ...
    @property
    def is_error(self) -> bool: ...
    @property
    def api_error_status(self) -> int | None: ...


@dataclass(frozen=True)
class Capture:
    kind: CaptureKind
    envelope: Envelope | None
    detail: str

    @property
    def zero_turns(self) -> bool | None:
        """True = proven zero turns (no envelope, or ``num_turns == 0``); None = could not check."""
        if self.kind is CaptureKind.NO_ENVELOPE:
            return True
        if self.envelope is None:
            return None
        if self.envelope.num_turns is None:
            return None  # an envelope without a turn count cannot prove the run never started
        return self.envelope.num_turns == 0

    @property
    def is_error(self) -> bool:
        return self.envelope is not None and self.envelope.is_error

    @property
    def api_error_status(self) -> int | None:
        return self.envelope.api_error_status if self.envelope is not None else None


# The scan's work bound. Every decode attempt is charged the characters it hands the decoder, and
# the whole scan may spend at most WORK_FACTOR x the capture plus WORK_FLOOR. A real capture is
# charged about 1x: each line is decoded once, a pretty-printed object once (bench/envelope_bench.py
# measures 1.0-1.3x on noisy real-shaped captures). Crafted text can make every brace a decode that
# runs far (``{"a":`` on 800k lines nests each attempt across the lines after it; 4.7 MB took 49 s
# before this bound), so the bound is what keeps the close-out inside its margin.
WORK_FACTOR = 4
WORK_FLOOR = 1 << 20  # 1 MiB: a small capture never runs out, whatever its shape
# The first window a decode attempt gets; doubled while the value may run past the window's end.
_FIRST_WINDOW = 256


class _Budget:
    """The characters the scan may still hand the decoder (the operation count the bench reads)."""

    def __init__(self, size: int) -> None:
        self.limit = WORK_FACTOR * size + WORK_FLOOR
        self.spent = 0

    def charge(self, chars: int) -> bool:
        """Charge an attempt of ``chars``; False when it does not fit (the scan must stop)."""
        if self.spent + chars > self.limit:
            return False
        self.spent += chars
        return True


class _OutOfBudget(Exception):
    """The scan spent its bound before the end of the capture: what is left proves nothing."""


# A decode cut by its window fails at the cut, or a few characters before it: a ``\\uXXXX`` escape
# or a literal cut in half is reported where it starts (at most 12 characters: a surrogate pair).
_CUT_SLACK = 16


def _maybe_cut(err: json.JSONDecodeError, size: int) -> bool:
    """Did the decode fail only because the window ended? (An unterminated string reports where
    the string *started*, so it may be a cut too.)"""
    return err.pos >= size - _CUT_SLACK or err.msg.startswith("Unterminated string")


def _decode_window(
    text: str, i: int, stop: int, budget: _Budget
) -> tuple[tuple[Any, int] | None, bool]:
    """The JSON value at ``text[i]`` read from ``text[i:stop]`` in doubling windows, and whether a
    failure came at ``stop`` (the value may continue past it).

    A window is a slice, so a failed attempt's error message (which counts newlines up to the
    failure) costs the window, never the capture before ``i``.
    """
    window = _FIRST_WINDOW
    while True:
        end = min(stop, i + window)
        if not budget.charge(end - i):
            raise _OutOfBudget
        piece = text[i:end]
        try:
            value, used = _DECODER.raw_decode(piece)
            return (value, i + used), False
        except json.JSONDecodeError as err:
            if end >= stop:
                return None, err.pos >= len(piece.rstrip())
            if not _maybe_cut(err, end - i):
                return None, False
        except RecursionError:
            return None, False
        window *= 2


def _decode_at(text: str, i: int, budget: _Budget) -> tuple[Any, int] | None:
    """The JSON value starting at ``text[i]`` and its end, or None.

    The value is first read from its own line; it is read across lines only when it failed at the
    end of that line, i.e. when it may continue on the next one (pretty-printed JSON). Both reads
    are charged to ``budget``.
    """
    eol = text.find("\n", i)
    stop = len(text) if eol == -1 else eol
    decoded, at_end = _decode_window(text, i, stop, budget)
    if decoded is not None or eol == -1 or not at_end:
        return decoded
    return _decode_window(text, i, len(text), budget)[0]


def _objects(text: str, budget: _Budget) -> list[tuple[int, int, Any]]:
    """Every well-formed top-level JSON object in ``text`` as (start, end, value), in order.

    A ``{`` that does not open a valid object (a log line, a truncated tail) is skipped; a valid
    object is skipped whole, so objects nested in it are not top-level. JSON strings cannot hold a
    raw newline, so a broken string never swallows the lines after it. Raises
    :class:`_OutOfBudget` when the capture costs more than its bound.
    """
    found: list[tuple[int, int, Any]] = []
    m = _OPENING.search(text)
    while m is not None:
        decoded = _decode_at(text, m.start(), budget)
        if decoded is None:
            m = _OPENING.search(text, m.start() + 1)
            continue
        value, end = decoded
        found.append((m.start(), end, value))
        m = _OPENING.search(text, end)
    return found


def _gaps(text: str, objects: list[tuple[int, int, Any]]) -> list[str]:
    """The stretches of ``text`` that lie outside every complete top-level object."""
    gaps, at = [], 0
    for start, end, _value in objects:
        gaps.append(text[at:start])
        at = end
    gaps.append(text[at:])
    return gaps


def _clip(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _field(obj: dict[str, Any], name: str, types: tuple[type, ...], default: Any) -> Any:
    """``obj[name]`` when it has one of ``types`` (bool is never an int here); raise otherwise."""
    if name not in obj or obj[name] is None:
        return default
    value = obj[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise TypeError(f"{name} is {_clip(value)}, expected {'/'.join(t.__name__ for t in types)}")
    return value


def envelope_from(obj: dict[str, Any]) -> Envelope:
    """Build an :class:`Envelope` from a decoded result object; ``TypeError`` names a bad field."""
    cost = _field(obj, "total_cost_usd", (int, float), None)
    return Envelope(
        subtype=_field(obj, "subtype", (str,), ""),
        is_error=_field(obj, "is_error", (bool,), False),
        num_turns=_field(obj, "num_turns", (int,), None),
        result=_field(obj, "result", (str,), ""),
        api_error_status=_field(obj, "api_error_status", (int,), None),
        terminal_reason=_field(obj, "terminal_reason", (str,), None),
        session_id=_field(obj, "session_id", (str,), None),
        total_cost_usd=None if cost is None else float(cost),
        raw=json.dumps(obj, sort_keys=True, ensure_ascii=False),
    )


def parse_capture(text: str) -> Capture:
    """Classify a merged stdout+stderr capture; never raises on any input, and costs at most
    ``WORK_FACTOR`` x its size in decoder work (:func:`scan_work`)."""
    return _classify(text, _Budget(len(text)))


def scan_work(text: str) -> tuple[int, int]:
    """(characters the scan handed the decoder, its bound) for ``text``: the bench's and the
    tests' operation count, read from the production scan."""
    budget = _Budget(len(text))
    _classify(text, budget)
    return budget.spent, budget.limit


def json_objects(text: str) -> tuple[list[tuple[int, int, Any]], list[str]] | None:
    """The top-level JSON objects of a capture as (start, end, value) and the text between them,
    under the same bound as :func:`parse_capture`; None when the capture cost more than it."""
    try:
        objects = _objects(text, _Budget(len(text)))
    except _OutOfBudget:
        return None
    return objects, _gaps(text, objects)


def over_budget_detail(text: str) -> str:
    return (
        f"capture not read: {len(text)} characters cost more than the scan's bound "
        f"({WORK_FACTOR}x the capture) before its end, so it proves nothing about turns"
    )


def _classify(text: str, budget: _Budget) -> Capture:
    try:
        objects = _objects(text, budget)
    except _OutOfBudget:
        return Capture(CaptureKind.GARBLED, None, over_budget_detail(text))
    results = [
        (s, e, o) for s, e, o in objects if isinstance(o, dict) and o.get("type") == "result"
    ]
    ignored = len(objects) - len(results)
    if results:
        _start, _end, obj = results[-1]
        try:
            envelope = envelope_from(obj)
        except TypeError as err:
            return Capture(CaptureKind.GARBLED, None, f"result envelope with a bad field: {err}")
        return Capture(
            CaptureKind.ENVELOPE,
            envelope,
            f"result envelope: subtype={envelope.subtype!r} is_error={envelope.is_error} "
            f"num_turns={envelope.num_turns}",
        )
    if any(_RESULT_FRAGMENT.search(gap) for gap in _gaps(text, objects)):
        return Capture(CaptureKind.GARBLED, None, "a result envelope starts but never completes")
    noise = f" ({ignored} non-result JSON object(s) ignored)" if ignored else ""
    return Capture(CaptureKind.NO_ENVELOPE, None, f"no result envelope in the capture{noise}")
