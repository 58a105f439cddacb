"""One contract over all four agent kinds, driven by recorded outputs (tests/fixtures/agents/).

Each fixture file records one CLI's output shapes, with the sources in its ``notes``. Every kind's
adapter must: read its recordings as recorded; never raise, whatever the text; never read unknown
turns as zero; raise a capacity signal only with the matching error class; keep its reading under
noise around the output, stderr interleaved between lines, and a cut-off tail.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.agentkinds import ADAPTERS, AgentKind, AgentReport, ErrorClass, detect_kind
from fleet.agentkinds import with_turn_flags as with_turns
from fleet.agentkinds.report import MAX_RESET
from fleet.core.model import CapacitySource
from fleet.runner.envelope import CaptureKind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
NOW = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)


def recordings(kind: AgentKind) -> list[dict]:
    data = json.loads((FIXTURES / f"{kind.value}.json").read_text(encoding="utf-8"))
    assert data["notes"], f"{kind}: a recording names its source"
    return data["cases"]


CASES = [(k, c) for k in AgentKind for c in recordings(k)]
SUCCESSES = [(k, c) for k, c in CASES if c["name"] == "success"]


def read(kind: AgentKind, output: str, exit_code: int | None) -> AgentReport:
    return ADAPTERS[kind].read(output, exit_code, NOW)


@pytest.mark.parametrize(("kind", "case"), CASES, ids=[f"{k}-{c['name']}" for k, c in CASES])
def test_each_recording_reads_as_recorded(kind: AgentKind, case: dict) -> None:
    r = read(kind, case["output"], case["exit"])
    want = case["expect"]
    assert r.agent is kind
    assert (str(r.kind), r.turns, str(r.error)) == (want["kind"], want["turns"], want["error"])
    if "final" in want:
        assert r.final_message == want["final"]
    if "tokens" in want:
        assert r.tokens == want["tokens"]
    if "cost" in want:
        assert r.cost_usd == want["cost"]
    if "reset" in want:
        assert r.reset_at is not None and r.reset_at.isoformat() == want["reset"]


def check_contract(r: AgentReport, exit_code: int | None) -> None:
    """What the close-out relies on, for every kind and every text."""
    assert r.turns is None or r.turns >= 0
    assert r.zero_turns is (None if r.turns is None else r.turns == 0)
    limit = r.limit
    if r.error is ErrorClass.USAGE_LIMIT:
        assert limit is not None and limit.source is CapacitySource.RATE_LIMIT
    elif r.error is ErrorClass.AUTH_REVOKED:
        assert limit is not None and limit.source is CapacitySource.REVOKED
        assert limit.reset_at is None
    else:
        assert limit is None and r.reset_at is None
    if limit is not None:
        assert limit.evidence  # the raw evidence is quoted
        # a past reset is no recovery; one beyond the longest provider window is not credible
        assert limit.reset_at is None or NOW < limit.reset_at <= NOW + MAX_RESET
    if r.clean(exit_code):
        assert exit_code == 0 and r.error is ErrorClass.NONE
    if r.agent is AgentKind.PLAIN:
        assert r.turns is None and r.kind is CaptureKind.NOT_PARSED and limit is None
    if r.kind is CaptureKind.GARBLED:
        assert r.turns is None  # could not read: never a proof of zero turns
    hash(r)


exits = st.sampled_from([0, 1, 2, 42, 53, 124, None])


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(AgentKind)), st.text(max_size=300), exits)
def test_any_text_keeps_the_contract(kind: AgentKind, text: str, exit_code: int | None) -> None:
    check_contract(read(kind, text, exit_code), exit_code)


json_ish = st.text(alphabet='{}[]":,0123456789 abcdefghijklmnopqrstuvwxyz.\n\\|', max_size=300)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(list(AgentKind)), json_ish, exits)
def test_json_like_garbage_keeps_the_contract(
    kind: AgentKind, text: str, exit_code: int | None
) -> None:
    check_contract(read(kind, text, exit_code), exit_code)


# Log noise and stderr as a merged capture holds them: no braces (a brace may open an object).
noise_line = st.text(
    alphabet=st.characters(blacklist_characters="{}\n\r", blacklist_categories=("Cs",)),
    max_size=60,
)


def _essence(r: AgentReport) -> tuple:
    return (r.kind, r.turns, r.error, r.final_message, r.tokens)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(SUCCESSES), st.lists(noise_line, max_size=4), st.lists(noise_line, max_size=4)
)
def test_noise_around_the_output_changes_nothing(
    pair: tuple[AgentKind, dict], before: list[str], after: list[str]
) -> None:
    kind, case = pair
    clean = read(kind, case["output"], case["exit"])
    text = "".join(f"{n}\n" for n in before) + case["output"] + "".join(f"\n{n}" for n in after)
    assert _essence(read(kind, text, case["exit"])) == _essence(clean)


def _writes(output: str) -> list[str]:
    """The output as the CLI writes it: one line at a time, a pretty-printed object in one go."""
    writes: list[str] = []
    for line in output.splitlines(keepends=True):
        if writes and writes[-1].startswith("{\n") and not writes[-1].endswith("\n}\n"):
            writes[-1] += line
        else:
            writes.append(line)
    return writes


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SUCCESSES), st.data())
def test_stderr_interleaved_between_lines_changes_nothing(
    pair: tuple[AgentKind, dict], data: st.DataObject
) -> None:
    """Codex streams progress to stderr while its events go to stdout; the capture merges both."""
    kind, case = pair
    mixed = []
    for line in _writes(case["output"]):
        mixed.append(line)
        mixed += [f"{n}\n" for n in data.draw(st.lists(noise_line, max_size=2))]
    clean = read(kind, case["output"], case["exit"])
    assert _essence(read(kind, "".join(mixed), case["exit"])) == _essence(clean)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(CASES), st.floats(min_value=0, max_value=1))
def test_a_cut_off_output_never_claims_more_than_the_whole(
    pair: tuple[AgentKind, dict], where: float
) -> None:
    kind, case = pair
    whole = read(kind, case["output"], case["exit"])
    cut_at = int(len(case["output"]) * where)
    r = read(kind, case["output"][:cut_at], case["exit"])
    check_contract(r, case["exit"])
    if r.turns is not None and whole.turns is not None:
        assert r.turns <= whole.turns
    # a limit or a revocation is never invented by a cut
    if r.limit is not None:
        assert whole.limit is not None and r.limit.source is whole.limit.source


# -- the kind from the command, and the max-turns flag ------------------------------------------


@pytest.mark.parametrize(
    ("command", "kind", "warns"),
    [
        ("claude -p --output-format json --permission-mode acceptEdits", AgentKind.CLAUDE, False),
        ("/usr/local/bin/codex exec --json --sandbox workspace-write -", AgentKind.CODEX, False),
        ("env GEMINI_API_KEY_FILE=x gemini -p go --output-format json", AgentKind.GEMINI, False),
        ("timeout 3000 claude -p", AgentKind.CLAUDE, False),
        ("python -m fleet.agents.demo", AgentKind.CLAUDE, False),
        ("python -m fleet.agents.demo --kind codex", AgentKind.CODEX, False),
        ("aider --yes-always", AgentKind.PLAIN, True),
        ("./run-agent.sh 'unclosed", AgentKind.PLAIN, True),
    ],
)
def test_the_kind_is_detected_from_the_commands_program(
    command: str, kind: AgentKind, warns: bool
) -> None:
    got, warning = detect_kind(command)
    assert got is kind
    assert (warning is not None) is warns


def test_max_turns_maps_to_each_clis_own_flag() -> None:
    assert with_turns("claude -p", AgentKind.CLAUDE, 150) == "claude -p --max-turns 150"
    assert with_turns("claude -p --max-turns 9", AgentKind.CLAUDE, 150) == "claude -p --max-turns 9"
    for kind in (AgentKind.CODEX, AgentKind.GEMINI, AgentKind.PLAIN):
        assert with_turns("x --json", kind, 150) == "x --json"  # no documented flag: none invented
    assert with_turns("claude -p", AgentKind.CLAUDE, None) == "claude -p"
