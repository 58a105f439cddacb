"""The versioned brief (D17, D9, D19) and the results file."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.closing import has_live_keyword
from fleet.core.model import Mention
from fleet.runner.brief import (
    PLACEHOLDERS,
    BriefError,
    brief_template,
    brief_version,
    clear_results,
    declared_blocker,
    read_results,
    render_brief,
)

AT = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)


def render(body: str = "Make the widget blue.", title: str = "Blue widget", mentions=()):
    return render_brief(
        issue=42,
        title=title,
        body=body,
        mentions=list(mentions),
        results_file="/run/results.json",
        worktree="/srv/wt/42-abc",
    )


def test_the_brief_is_versioned_on_its_first_line() -> None:
    assert brief_template().splitlines()[0] == "brief-version: 1"
    assert brief_version() == "1"
    assert render().version == "1"


def test_every_placeholder_is_in_the_template_and_none_survives_rendering() -> None:
    template = brief_template()
    for name in PLACEHOLDERS:
        assert "{{" + name + "}}" in template
    text = render().text
    assert not any("{{" + name + "}}" in text for name in PLACEHOLDERS)
    assert "issue #42 — Blue widget" in text
    assert "/srv/wt/42-abc" in text and "/run/results.json" in text
    assert "Make the widget blue." in text


@pytest.mark.parametrize(
    "rule",
    [
        "origin/main",
        "never from a local `main`",
        "Push your topic branch by name",
        "MERGED, not when auto-merge is armed",
        "Do not close the issue yourself",
        "waiting is never the move",
        '{"blocker": {"reason": "<one line>", "needs": [123, 456]}}',
        "exact command and its raw output",
        "Nothing in this fleet reads English",
    ],
)
def test_the_brief_carries_the_rules(rule: str) -> None:
    assert rule.lower() in render().text.lower()


def test_the_brief_itself_carries_no_live_closing_keyword() -> None:
    # D14: a generated text quoted back into a PR body must not close anything.
    assert not has_live_keyword(render().text)


def test_the_rules_are_numbered_and_sized_to_read() -> None:
    template = brief_template()
    numbers = [int(n) for n in re.findall(r"^(\d+)\. ", template, re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1))
    assert 40 <= len(template.splitlines()) <= 80


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("see {{title}} and {{issue}}", id="placeholders-in-body"),
        pytest.param("format bait {0} {issue} {title!r} %s", id="format-bait"),
        pytest.param("{{body}}{{mentions}}{{body}}", id="self-reference"),
    ],
)
def test_an_attacker_controlled_body_arrives_verbatim(body: str) -> None:
    text = render(body=body, title="T").text
    assert body in text
    assert text.count("issue #42 — T") == 1


def test_a_title_with_placeholders_is_not_expanded() -> None:
    text = render(title="{{body}}", body="BODY").text
    assert "issue #42 — {{body}}" in text
    assert text.count("BODY") == 1


def test_mentions_are_injected_oldest_first() -> None:
    later = Mention(2, 42, "bob", "second {{title}}", AT.replace(hour=12))
    first = Mention(1, 42, "alice", "first\nline two", AT)
    text = render(mentions=[later, first]).text
    assert text.index("@alice") < text.index("@bob")
    assert "second {{title}}" in text and "  line two" in text


def test_no_mentions_says_none() -> None:
    assert render().text.rstrip().endswith("(none)")


def test_a_template_without_a_version_line_is_refused() -> None:
    with pytest.raises(BriefError):
        render_brief(
            issue=1,
            title="t",
            body="b",
            mentions=[],
            results_file="r",
            worktree="w",
            template="# no version\n{{body}}\n",
        )


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=200).filter(lambda s: s.strip()))
def test_any_body_appears_verbatim_exactly_as_given(body: str) -> None:
    text = render(body=body, title="T").text
    assert body in text
    rest = text.replace(body, "", 1)
    assert not any("{{" + name + "}}" in rest for name in PLACEHOLDERS)


# -- the results file ----------------------------------------------------------------------------


def test_results_round_trip_and_clear(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    assert read_results(path) == (None, None)
    payload = {"blocker": {"reason": "needs the schema", "needs": [7, 9]}}
    path.write_text(json.dumps(payload))
    assert read_results(path) == (payload, None)
    clear_results(path)
    assert not path.exists()
    clear_results(path)  # clearing an absent file is fine: it is run-start hygiene


@pytest.mark.parametrize(
    ("content", "warned"),
    [
        pytest.param("", False, id="empty-is-nothing-written"),
        pytest.param("{broken", True, id="not-json"),
        pytest.param('["blocker"]', True, id="a-list-not-an-object"),
        pytest.param('"blocked"', True, id="a-string"),
    ],
)
def test_garbage_results_are_reported_not_trusted(
    tmp_path: Path, content: str, warned: bool
) -> None:
    path = tmp_path / "results.json"
    path.write_text(content)
    data, warning = read_results(path)
    assert data is None
    assert (warning is not None) is warned


@pytest.mark.parametrize(
    ("results", "blocker", "warned"),
    [
        pytest.param(None, None, False, id="no-results"),
        pytest.param({"notes": "x"}, None, False, id="no-blocker-key"),
        pytest.param(
            {"blocker": {"reason": "r", "needs": [3]}},
            {"reason": "r", "needs": [3]},
            False,
            id="well-formed",
        ),
        pytest.param(
            {"blocker": {"reason": "r"}}, {"reason": "r", "needs": []}, False, id="needs-optional"
        ),
        pytest.param({"blocker": "yes"}, None, True, id="blocker-not-an-object"),
        pytest.param({"blocker": {"needs": [3]}}, None, True, id="no-reason"),
        pytest.param({"blocker": {"reason": "r", "needs": ["#3"]}}, None, True, id="needs-strs"),
        pytest.param({"blocker": {"reason": "r", "needs": [True]}}, None, True, id="needs-bool"),
    ],
)
def test_declared_blocker_shape(results: dict | None, blocker: dict | None, warned: bool) -> None:
    got, warning = declared_blocker(results)
    assert got == blocker
    assert (warning is not None) is warned
