"""The Claude Code adapter: limits and revocations only from the CLI's own error fields (D8, #16).

The attacks come from "The agent is not trusted either": a final message whose text carries a
usage limit with a reset in the past bought reruns (six with ``attempt_cap: 2``); one containing
"Invalid API key" with exit 0 darkened every worker as revoked, for good. Each is replayed here
through ``decide_close_out``, the function the runner's close-out calls.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from fleet.agentkinds import ADAPTERS, AgentKind, ErrorClass
from fleet.core.markers import Kind
from fleet.core.model import CapacitySource, PRState, PullRequest
from fleet.runner.closeout import decide_close_out
from fleet.runner.outcome import Outcome

NOW = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
START = NOW - timedelta(minutes=20)
RATE, REVOKED = CapacitySource.RATE_LIMIT, CapacitySource.REVOKED
read = ADAPTERS[AgentKind.CLAUDE].read


def envelope(**fields: object) -> str:
    obj = {"type": "result", "subtype": "success", "is_error": False, "num_turns": 6, **fields}
    return "[hook] starting\n" + json.dumps(obj) + "\n"


def close(output: str, exit_code: int = 0, prs: tuple[PullRequest, ...] = ()):  # type: ignore[no-untyped-def]
    return decide_close_out(
        output=output,
        prs=prs,
        forge_error=None,
        run_started_at=START,
        exit_code=exit_code,
        signal_name=None,
        timed_out=False,
        workspace_failure=None,
        retries_so_far=0,
        backoffs_s=(30, 120, 480),
        results=None,
        now=NOW,
        agent=AgentKind.CLAUDE,
    )


# -- the attacks: the model's own words --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Invalid API key · Please run /login", id="invalid-api-key"),
        pytest.param("OAuth token revoked · Please run /login", id="token-revoked"),
        pytest.param("authentication_failed", id="the-field-word-as-text"),
        pytest.param('{"type":"system","error":"authentication_failed"}', id="event-as-text"),
    ],
)
def test_a_final_message_never_revokes_a_worker(text: str) -> None:
    """Was: "Invalid API key" in the final message with exit 0 darkened the worker as revoked."""
    out = close(envelope(result=text))
    assert out.limit is None
    assert out.decision.outcome is Outcome.NO_OP
    assert not out.marker.startswith("◐")
    assert out.clean(0)  # a clean run: it heals the worker instead of darkening it


def test_revocation_text_on_its_own_line_beside_an_envelope_revokes_nothing() -> None:
    capture = "Invalid API key · Please run /login\n" + envelope(result="done")
    assert close(capture).limit is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("Done. Claude AI usage limit reached|1000000000", id="epoch-form-inside-text"),
        pytest.param("Claude AI usage limit reached|1000000000\nMerged.", id="epoch-form-line-1"),
        pytest.param("You've hit your limit · resets 3pm (Europe/Lisbon)", id="phrase-not-error"),
        pytest.param("Error: You've hit your weekly limit", id="prefixed-phrase-not-error"),
    ],
)
def test_a_final_message_that_mentions_a_limit_is_not_a_capacity_outcome(text: str) -> None:
    out = close(envelope(result=text))
    assert out.limit is None and out.decision.outcome is Outcome.NO_OP


def test_the_exact_epoch_form_with_a_past_reset_is_dark_with_an_unknown_reset() -> None:
    """Was: ``…usage limit reached|1000000000`` read as recovered at once, a free rerun each time.
    The exact whole-result form is the CLI's documented limit report (exit 0 happens), so it is
    accepted — but a stated reset already past is not a recovery."""
    out = close(envelope(result="Claude AI usage limit reached|1000000000", num_turns=1))
    assert out.decision.outcome is Outcome.CAPACITY
    assert out.limit is not None and out.limit.source is RATE
    assert out.limit.reset_at is None
    assert "already past" in out.limit.evidence
    assert " reset=unknown" in out.marker.splitlines()[0]
    assert not out.clean(0)


# -- what the CLI itself reports ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "exit_code", "source", "reset"),
    [
        pytest.param(
            {"result": "You've hit your limit · resets 1pm (Europe/Lisbon)", "is_error": True},
            1,
            RATE,
            datetime(2026, 3, 10, 13, 0, tzinfo=UTC),
            id="phrase-as-the-whole-error-result",
        ),
        pytest.param(
            {
                "result": "You’ve hit your session limit · resets 5:10pm (Europe/Paris)",
                "is_error": True,
                "api_error_status": 429,
            },
            1,
            RATE,
            datetime(2026, 3, 10, 16, 10, tzinfo=UTC),
            id="typographic-apostrophe-with-minutes",
        ),
        pytest.param(
            {"result": "Claude AI usage limit reached|1773273600"},
            0,
            RATE,
            datetime(2026, 3, 12, tzinfo=UTC),
            id="epoch-form-with-exit-0-and-is-error-false",
        ),
        pytest.param(
            {"result": "5-hour limit reached · resets 3pm (…)", "is_error": True},
            1,
            RATE,
            None,
            id="unknown-zone-no-reset-invented",
        ),
        pytest.param({"api_error_status": 401, "is_error": True}, 1, REVOKED, None, id="401"),
        pytest.param({"api_error_status": 403, "is_error": True}, 1, REVOKED, None, id="403"),
        pytest.param(
            {"terminal_reason": "authentication_failed", "is_error": True},
            1,
            REVOKED,
            None,
            id="terminal-reason",
        ),
        pytest.param(
            {
                "result": "You've hit your limit · resets 1pm (Europe/Lisbon)",
                "api_error_status": 401,
                "is_error": True,
            },
            1,
            REVOKED,
            None,
            id="revoked-outranks-a-limit-text",
        ),
    ],
)
def test_the_clis_own_error_fields_are_capacity_signals(
    fields: dict, exit_code: int, source: CapacitySource, reset: datetime | None
) -> None:
    out = close(envelope(**fields), exit_code)
    assert out.limit is not None
    assert (out.limit.source, out.limit.reset_at) == (source, reset)
    assert out.decision.outcome is Outcome.CAPACITY
    assert out.limit.evidence in out.marker  # the raw evidence is quoted in the marker


def test_a_429_alone_is_transient_not_a_quota() -> None:
    report = read(envelope(api_error_status=429, is_error=True, num_turns=0), 1, NOW)
    assert report.error is ErrorClass.OVERLOADED and report.limit is None


@pytest.mark.parametrize(
    ("capture", "error"),
    [
        pytest.param(
            "You've hit your limit · resets 1pm (Europe/Lisbon)\n",
            ErrorClass.USAGE_LIMIT,
            id="limit-line-before-any-turn",
        ),
        pytest.param(
            '{"type":"system","subtype":"api_retry","error_status":401,'
            '"error":"authentication_failed"}\n',
            ErrorClass.AUTH_REVOKED,
            id="cli-auth-event-before-any-turn",
        ),
        pytest.param("Invalid API key · Please run /login\n", ErrorClass.OTHER, id="text-alone"),
        pytest.param("API Error: 529 Overloaded\n", ErrorClass.OVERLOADED, id="overloaded"),
    ],
)
def test_before_the_first_turn_the_capture_is_the_clis_own(capture: str, error: ErrorClass) -> None:
    report = read(capture, 1, NOW)
    assert report.zero_turns is True
    assert report.error is error


def test_a_limit_line_with_exit_zero_and_no_envelope_is_no_limit() -> None:
    assert read("You've hit your limit · resets 1pm (Europe/Lisbon)\n", 0, NOW).limit is None


def test_a_trailing_limit_notice_does_not_darken_but_does_not_heal() -> None:
    capture = envelope(result="done") + "You've hit your limit · resets 1pm (Europe/Lisbon)\n"
    out = close(capture)
    assert out.limit is None
    assert not out.clean(0)  # D8 property 1: the notice may still be true


def test_a_merged_pr_still_decides_over_a_limit() -> None:
    pr = PullRequest(
        number=5,
        title="x",
        body="Closes #7",
        branch="fleet/issue-7",
        state=PRState.MERGED,
        merged=True,
        created_at=START + timedelta(minutes=1),
        merged_at=NOW,
    )
    out = close(envelope(result="Claude AI usage limit reached|1773273600"), prs=(pr,))
    assert out.decision.outcome is Outcome.SUCCESS
    assert out.marker.startswith("✔") and Kind.SUCCESS.value in out.marker


def test_a_reset_stated_years_ahead_is_unknown_not_years_of_darkness() -> None:
    """Claude's limit form is plain result text, so the model can name any epoch: 9999999999 kept
    the worker dark until 2286. A reset beyond the longest provider window (7 days) is unknown."""
    out = close(envelope(result="Claude AI usage limit reached|9999999999", num_turns=1))
    assert out.limit is not None and out.limit.reset_at is None
    assert "beyond the longest provider window" in out.limit.evidence
