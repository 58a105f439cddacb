"""The retry gate (D7): retry only when all four facts hold, with a rung of the ladder left."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.model import CapacitySource
from fleet.runner.capacity import LimitSignal
from fleet.runner.envelope import Capture, parse_capture
from fleet.runner.retry import FACTS, backoff_warning, decide_retry, transient_signature

BACKOFFS = (30, 120, 480)
OVERLOADED = 'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}\n'
NO_ENVELOPE = parse_capture(OVERLOADED)
WITH_TURNS = parse_capture(json.dumps({"type": "result", "num_turns": 4, "is_error": True}))
GARBLED = parse_capture('{"type":"result","num_turns":4,"res')
LIMIT = LimitSignal(CapacitySource.RATE_LIMIT, None, "You've hit your limit")


def decide(
    *,
    capture: Capture = NO_ENVELOPE,
    output: str = OVERLOADED,
    exit_code: int = 1,
    limit: LimitSignal | None = None,
    artifact_found: bool = False,
    retries_so_far: int = 0,
):
    return decide_retry(
        capture=capture,
        output=output,
        exit_code=exit_code,
        limit=limit,
        artifact_found=artifact_found,
        retries_so_far=retries_so_far,
        backoffs_s=BACKOFFS,
    )


@pytest.mark.parametrize(("retries", "delay"), [(0, 30), (1, 120), (2, 480)])
def test_all_four_facts_retry_on_the_next_rung(retries: int, delay: int) -> None:
    d = decide(retries_so_far=retries)
    assert d.retry and d.delay_s == delay
    assert d.facts == tuple((name, True) for name in FACTS)


def test_the_ladder_runs_out() -> None:
    d = decide(retries_so_far=3)
    assert not d.retry and d.delay_s is None
    assert d.reason == "no retry: retries exhausted (3 of 3)"


@pytest.mark.parametrize(
    ("kwargs", "false_fact"),
    [
        pytest.param({"output": "Error: something broke\n"}, "transient_signature", id="no-sig"),
        pytest.param({"output": "Request timed out\n"}, "transient_signature", id="bare-timeout"),
        pytest.param({"exit_code": 0}, "transient_signature", id="exit-zero"),
        pytest.param({"limit": LIMIT}, "not_quota", id="quota"),
        pytest.param({"capture": WITH_TURNS}, "never_started", id="turns-consumed"),
        pytest.param({"capture": GARBLED}, "never_started", id="garbled-proves-nothing"),
        pytest.param({"artifact_found": True}, "no_artifact", id="artifact"),
    ],
)
def test_one_false_fact_blocks_the_retry_and_is_named(kwargs: dict, false_fact: str) -> None:
    d = decide(**kwargs)
    assert not d.retry and d.delay_s is None
    assert dict(d.facts)[false_fact] is False
    assert d.reason.startswith(f"no retry: {false_fact} is false")


def test_the_first_false_fact_is_the_one_named() -> None:
    d = decide(limit=LIMIT, artifact_found=True)
    assert d.reason.startswith("no retry: not_quota is false")
    assert dict(d.facts) == {
        "transient_signature": True,
        "not_quota": False,
        "never_started": True,
        "no_artifact": False,
    }


@pytest.mark.parametrize(
    "text",
    [
        "API Error: 529 Overloaded",
        "API Error: 500 Internal Server Error",
        "HTTP 503",
        "HTTP/1.1 502 Bad Gateway",
        "504 Gateway Timeout",
        "status code 429",
        "429 Too Many Requests",
        '"api_error_status": 529',
        "overloaded_error",
        "read ECONNRESET",
        "connect ECONNREFUSED 127.0.0.1:443",
        "getaddrinfo ENOTFOUND api.example.com",
        "getaddrinfo EAI_AGAIN api.example.com",
        "Connection reset by peer",
        "connection refused",
        "Network error",
        "socket hang up",
        "TypeError: fetch failed",
    ],
)
def test_transient_signatures(text: str) -> None:
    assert transient_signature(f"noise\n{text}\nmore noise") is not None


@pytest.mark.parametrize(
    "text",
    [
        "timeout",
        "Request timed out",
        "TimeoutError: deadline exceeded",
        "tests: 529 passed",
        "line 503 of main.py",
        "AssertionError: 500 != 200",
    ],
)
def test_not_transient(text: str) -> None:
    assert transient_signature(text) is None


def test_a_zero_turn_envelope_with_a_5xx_status_is_transient() -> None:
    cap = parse_capture(json.dumps({"type": "result", "num_turns": 0, "api_error_status": 529}))
    d = decide(capture=cap, output="")
    assert d.retry, d.reason


@settings(max_examples=150, deadline=None)
@given(
    output=st.sampled_from([OVERLOADED, "boom", "Request timed out", "socket hang up"]),
    capture=st.sampled_from([NO_ENVELOPE, WITH_TURNS, GARBLED]),
    exit_code=st.sampled_from([0, 1, 137]),
    limit=st.sampled_from([None, LIMIT]),
    artifact_found=st.booleans(),
    retries=st.integers(0, 5),
)
def test_a_retry_always_rests_on_all_four_facts(
    output: str,
    capture: Capture,
    exit_code: int,
    limit: LimitSignal | None,
    artifact_found: bool,
    retries: int,
) -> None:
    d = decide(
        capture=capture,
        output=output,
        exit_code=exit_code,
        limit=limit,
        artifact_found=artifact_found,
        retries_so_far=retries,
    )
    assert [name for name, _ in d.facts] == list(FACTS)
    if d.retry:
        assert all(value for _, value in d.facts)
        assert d.delay_s == BACKOFFS[retries]
        assert exit_code != 0 and limit is None and not artifact_found
        assert capture is NO_ENVELOPE
    else:
        assert d.delay_s is None


def test_a_backoff_shorter_than_the_cli_window_is_flagged() -> None:
    assert backoff_warning((30, 120, 480)) is not None
    assert backoff_warning((240, 480)) is None
    assert backoff_warning(()) is None
