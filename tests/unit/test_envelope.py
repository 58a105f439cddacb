"""The envelope scan (D7, run step 7): the last result envelope in a noisy merged capture."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.runner.envelope import CaptureKind, envelope_from, parse_capture, scan_work

SUCCESS = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "duration_ms": 5120,
    "num_turns": 7,
    "session_id": "0f3c",
    "result": "Merged PR #12.",
    "total_cost_usd": 0.42,
    "usage": {"input_tokens": 10, "nested": {"type": "result"}},
    "api_error_status": None,
    "terminal_reason": "completed",
}
LINE = json.dumps(SUCCESS)


def test_a_bare_envelope_is_read_with_every_field() -> None:
    cap = parse_capture(LINE)
    assert cap.kind is CaptureKind.ENVELOPE
    env = cap.envelope
    assert env is not None
    assert (env.subtype, env.is_error, env.num_turns, env.turns_consumed) == (
        "success",
        False,
        7,
        7,
    )
    assert (env.result, env.session_id, env.total_cost_usd) == ("Merged PR #12.", "0f3c", 0.42)
    assert env.api_error_status is None and env.terminal_reason == "completed"
    assert env.data() == SUCCESS
    assert cap.zero_turns is False
    hash(env)  # frozen and hashable: raw is a string, not a dict


@pytest.mark.parametrize(
    "capture",
    [
        pytest.param(f"Loading config...\n{LINE}\n", id="noise-before"),
        pytest.param(f"{LINE}\nsession saved\nbye\n", id="noise-after"),
        pytest.param(f"warn: x {{ y\n{LINE}\n[hook] {{oops\n", id="stray-braces-in-log-lines"),
        pytest.param(f"pre\n{json.dumps(SUCCESS, indent=2)}\npost", id="pretty-multi-line"),
        pytest.param(
            f'{LINE}\n{{"type": "result", "subtype": "succ', id="truncated-trailing-object"
        ),
        pytest.param(f'{{"type":"system","subtype":"init"}}\n{LINE}\n', id="stream-json-events"),
        pytest.param(f'{LINE}\n{{"level": "info", "msg": "exit"}}\n', id="json-log-line-after"),
        pytest.param(f'API Error: 529 {{"type":"error"}}\n{LINE}', id="error-body-then-envelope"),
        pytest.param(f"noise{LINE}noise", id="glued-to-noise-on-one-line"),
    ],
)
def test_noise_around_the_envelope_does_not_hide_it(capture: str) -> None:
    cap = parse_capture(capture)
    assert cap.kind is CaptureKind.ENVELOPE, cap.detail
    assert cap.envelope is not None and cap.envelope.data() == SUCCESS


def test_braces_inside_strings_are_part_of_the_string() -> None:
    obj = dict(SUCCESS, result='done } { "type": "result" {{ }}')
    cap = parse_capture(f"x {{\n{json.dumps(obj)}\n")
    assert cap.envelope is not None and cap.envelope.result == obj["result"]


def test_the_last_envelope_wins() -> None:
    first = json.dumps(dict(SUCCESS, num_turns=1, result="first"))
    cap = parse_capture(f"{first}\nretrying\n{LINE}")
    assert cap.envelope is not None and cap.envelope.result == "Merged PR #12."


@pytest.mark.parametrize(
    "capture",
    [
        pytest.param("", id="empty"),
        pytest.param("Error: connect ECONNREFUSED 127.0.0.1:443\n", id="plain-text"),
        pytest.param(
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}\n',
            id="an-error-body-is-json-but-not-an-envelope",
        ),
        pytest.param('{"type":"assistant","message":{"type":"result"}}', id="nested-is-not-top"),
        pytest.param("{ not json at all }", id="brace-noise"),
    ],
)
def test_no_envelope_is_the_proof_of_zero_turns(capture: str) -> None:
    cap = parse_capture(capture)
    assert cap.kind is CaptureKind.NO_ENVELOPE
    assert cap.envelope is None and cap.zero_turns is True


def test_a_missing_num_turns_proves_nothing() -> None:
    """An envelope that does not count its turns cannot prove the run never started (D20): read as
    zero, it made a cross-repo merge look like a zero-turn no-op."""
    cap = parse_capture('{"type": "result", "subtype": "success"}')
    assert cap.envelope is not None and cap.envelope.num_turns is None
    assert cap.zero_turns is None


@pytest.mark.parametrize(
    ("capture", "needle"),
    [
        pytest.param('{"type":"result","num_turns":"3"}', "num_turns", id="turns-as-string"),
        pytest.param('{"type":"result","num_turns":true}', "num_turns", id="turns-as-bool"),
        pytest.param('{"type":"result","is_error":"no"}', "is_error", id="is-error-as-string"),
        pytest.param('{"type":"result","result":["x"]}', "result", id="result-as-list"),
        pytest.param('{"type":"result","api_error_status":"429"}', "api_error", id="status-str"),
        pytest.param('{"type":"result","total_cost_usd":"1"}', "total_cost", id="cost-as-string"),
    ],
)
def test_a_result_object_with_wrong_types_is_garbled_not_a_crash(capture: str, needle: str) -> None:
    cap = parse_capture(f"noise\n{capture}\n")
    assert cap.kind is CaptureKind.GARBLED
    assert needle in cap.detail
    assert cap.zero_turns is None  # could not check: never a proof of zero turns


def test_an_envelope_cut_off_mid_print_is_garbled() -> None:
    cap = parse_capture('chatter\n{"type":"result","subtype":"success","num_turns":5,"result":"Do')
    assert cap.kind is CaptureKind.GARBLED
    assert cap.zero_turns is None


def test_a_cut_off_envelope_followed_by_other_json_is_still_garbled() -> None:
    cap = parse_capture('{"type": "result", "num_turns": 5, "res\n{"level": "info"}\n')
    assert cap.kind is CaptureKind.GARBLED


def test_deep_nesting_does_not_raise() -> None:
    cap = parse_capture("{" + '"a":[' * 50_000)
    assert cap.kind is CaptureKind.NO_ENVELOPE


envelopes = st.fixed_dictionaries(
    {
        "type": st.just("result"),
        "subtype": st.sampled_from(["success", "error_max_turns", "error_during_execution"]),
        "is_error": st.booleans(),
        "num_turns": st.integers(min_value=0, max_value=500),
        "result": st.text(max_size=80),
        "api_error_status": st.one_of(st.none(), st.sampled_from([401, 429, 500, 529])),
        "session_id": st.text(max_size=20),
        "total_cost_usd": st.floats(min_value=0, max_value=100, allow_nan=False),
    }
)
noise = st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=200)


@settings(max_examples=200, deadline=None)
@given(envelopes, noise, noise, st.sampled_from([None, 2]))
def test_any_braceless_noise_around_an_envelope_parses_to_it(
    obj: dict, before: str, after: str, indent: int | None
) -> None:
    cap = parse_capture(before + json.dumps(obj, indent=indent) + after)
    assert cap.kind is CaptureKind.ENVELOPE
    assert cap.envelope == envelope_from(obj)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises(text: str) -> None:
    cap = parse_capture(text)
    assert cap.kind in set(CaptureKind)
    assert (cap.envelope is not None) == (cap.kind is CaptureKind.ENVELOPE)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='{}[]":,0123456789 abcdefghijklmnopqrstuvwxyz\n\\', max_size=300))
def test_json_like_garbage_never_raises(text: str) -> None:
    parse_capture(text)


def test_a_large_capture_full_of_broken_json_is_scanned_in_linear_time() -> None:
    # A failed whole-capture decode costs O(position); trying each of 40k broken fragments that way
    # took minutes for a few MB. The per-line first attempt keeps this well under a second.
    noise = "".join(f'{i} {{stray {{"bad": x}} {{"k": {i}}}\n' for i in range(40_000))
    started = time.monotonic()
    cap = parse_capture(noise + json.dumps(SUCCESS, indent=2) + "\n" + noise[:500])
    assert cap.kind is CaptureKind.ENVELOPE
    assert time.monotonic() - started < 5


class _CountingDecoder:
    """Wraps the scan's decoder and counts the characters each call may touch (from its start to
    the end of the document it was handed): the operation count of the close-out's parse."""

    def __init__(self, inner: json.JSONDecoder) -> None:
        self.inner = inner
        self.chars = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[object, int]:
        self.chars += len(s) - idx
        return self.inner.raw_decode(s, idx)


CRAFTED = {
    # each line opens a value that continues on the next: every brace nests across what follows
    "open-object-per-line": '{"a":\n',
    "open-array-per-line": '{"a":[\n',
    "unterminated-string-per-line": '{"a":"x\n',
    "a-long-line-of-openers": '{"{"' * 2_000 + "\n",
}


@pytest.mark.parametrize("shape", list(CRAFTED.values()), ids=list(CRAFTED))
def test_crafted_output_costs_a_bounded_multiple_of_its_size(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue: crafted agent output made the close-out's parse quadratic (4.7 MB took 49 s, past
    the close-out margin, so no terminal marker was posted). The count is of characters handed to
    the decoder, not of seconds: a shared machine's clock proves nothing."""
    import fleet.runner.envelope as envelope

    counter = _CountingDecoder(envelope._DECODER)
    monkeypatch.setattr(envelope, "_DECODER", counter)
    text = shape * (300_000 // len(shape))
    cap = parse_capture(text)
    assert counter.chars <= envelope.WORK_FACTOR * len(text) + envelope.WORK_FLOOR
    assert cap.kind is not CaptureKind.ENVELOPE
    # What could not be read proves nothing: never "no envelope", which licenses a retry (D7).
    if counter.chars > len(text) * 2:
        assert cap.kind is CaptureKind.GARBLED and cap.zero_turns is None


def test_a_crafted_capture_that_runs_out_of_work_is_garbled_and_says_why() -> None:
    text = '{"a":\n' * 400_000
    spent, limit = scan_work(text)
    assert spent <= limit
    cap = parse_capture(text + LINE)
    assert cap.kind is CaptureKind.GARBLED
    assert "bound" in cap.detail and cap.zero_turns is None


@pytest.mark.parametrize(
    "envelope_text", [LINE, json.dumps(SUCCESS, indent=2)], ids=["compact", "pretty"]
)
def test_a_real_shaped_capture_costs_about_its_size(envelope_text: str) -> None:
    noise = "".join(f"[tool] step {i}: ok {{stray\n" for i in range(20_000))
    text = noise + envelope_text + "\n"
    spent, _limit = scan_work(text)
    assert parse_capture(text).kind is CaptureKind.ENVELOPE
    assert spent <= 1.5 * len(text)
