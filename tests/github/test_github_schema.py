"""Every GraphQL document the GitHub board sends is valid against GitHub's published schema, and
every recorded answer has exactly the fields its document asks for (the issue: "a query that
names a field GitHub does not have must fail the suite here, not in production")."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from graphql import parse, validate
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.board.github import queries as q
from tests.github import shape
from tests.github.replay import FIXTURES

GRAPHQL_FIXTURES = sorted(FIXTURES.glob("graphql_*.json"))


@pytest.mark.parametrize("name", sorted(q.DOCUMENTS))
def test_every_document_is_valid_against_githubs_schema(name: str) -> None:
    assert validate(shape.schema(), parse(q.DOCUMENTS[name])) == []


def test_a_field_github_does_not_have_fails_validation() -> None:
    bad = q.CLOSING_PULL_REQUESTS.replace("mergedAt", "mergedAt mergeCommitAuthorEmail")
    errors = validate(shape.schema(), parse(bad))
    assert any("mergeCommitAuthorEmail" in e.message for e in errors)


def test_fixtures_cover_every_read_document() -> None:
    named = {json.loads(p.read_text())["document"] for p in GRAPHQL_FIXTURES}
    reads = {"BOARD_PAGE", "EDGES", "ISSUE", "CLOSING_PULL_REQUESTS", "PROJECT"}
    assert reads <= named <= set(q.DOCUMENTS)


@pytest.mark.parametrize("path", GRAPHQL_FIXTURES, ids=lambda p: p.stem)
def test_every_recorded_answer_matches_its_document(path: Any) -> None:
    recorded = json.loads(path.read_text())
    assert shape.check(q.DOCUMENTS[recorded["document"]], recorded["response"]) == []


def test_every_fixture_is_noted_with_its_source() -> None:
    notes = (FIXTURES / "NOTES.md").read_text()
    for path in FIXTURES.glob("*.json"):
        assert path.name in notes, f"{path.name} has no source in NOTES.md"


# -- the checker itself: each kind of drift is reported ---------------------------------------


def _page() -> dict[str, Any]:
    return json.loads((FIXTURES / "graphql_board_page.json").read_text())["response"]


def _item(answer: dict[str, Any]) -> dict[str, Any]:
    return answer["data"]["repositoryOwner"]["projectV2"]["items"]["nodes"][0]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda a: _item(a)["content"].pop("stateReason"), "missing 'stateReason'"),
        (lambda a: _item(a)["content"].update(milestone=None), "'milestone' was not asked for"),
        (lambda a: _item(a)["content"].update(number=None), "null in a non-null field"),
        (lambda a: _item(a)["content"].update(number="7"), "is not a Int"),
        (lambda a: _item(a)["content"].update(state="DONE"), "is not a IssueState"),
        (
            lambda a: _item(a)["status"].update(__typename="Nope"),
            "is not a ProjectV2ItemFieldValue",
        ),
        (lambda a: _item(a)["status"].pop("__typename"), "no __typename"),
        (lambda a: _item(a).pop("status"), "missing 'status'"),
    ],
    ids=["missing", "extra", "null", "scalar", "enum", "typename", "no-typename", "alias"],
)
def test_checker_reports_each_kind_of_drift(mutate: Any, expected: str) -> None:
    answer = _page()
    mutate(answer)
    problems = shape.check(q.BOARD_PAGE, answer)
    assert any(expected in p for p in problems), problems


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in [(*path, k), *_paths(v, (*path, k))]]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _paths(v, (*path, i))]
    return []


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_dropping_any_key_of_a_recorded_answer_is_reported(data: st.DataObject) -> None:
    answer = _page()
    keyed = [p for p in _paths(answer["data"]) if isinstance(p[-1], str)]
    path = data.draw(st.sampled_from(keyed))
    parent = answer["data"]
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    assert shape.check(q.BOARD_PAGE, answer) != []


# -- cost (D1): GitHub's published formula -------------------------------------------------------

GITHUB_EXAMPLE = """
query {
  viewer {
    login
    repositories(first: 100) {
      edges { node { id issues(first: 50) { edges { node { id
        labels(first: 60) { edges { node { id name } } } } } } } }
    }
  }
}
"""


def test_cost_formula_reproduces_githubs_documented_example() -> None:
    """docs.github.com: 1 + 100 + 5,000 = 5,101 requests, which is 51 points."""
    assert q.connection_requests(GITHUB_EXAMPLE) == 5101
    assert q.query_cost(GITHUB_EXAMPLE) == 51


def test_a_cycle_costs_what_docs_github_md_says() -> None:
    page = {"first": 50}
    assert q.connection_requests(q.BOARD_PAGE, page) == 201
    assert q.query_cost(q.BOARD_PAGE, page) == 2  # per page of 50 -> 2 points for 50 items
    assert 10 * q.query_cost(q.BOARD_PAGE, page) == 20  # 500 items: ten pages
    assert q.query_cost(q.EDGES, {"ids": ["x"] * 100}) == 2  # 100 candidates' lists
    assert q.query_cost(q.PROJECT) == 1  # the minimum charge


# -- the schema is part of the repository (a plain clone runs these tests) ----------------------


@pytest.mark.parametrize("path", [shape.SCHEMA_PATH, shape.OLDER_SCHEMA_PATH], ids=lambda p: p.name)
def test_the_schema_is_in_the_repository_with_its_source_and_date(path: Any) -> None:
    assert path.is_file() and path.stat().st_size > 1_000_000, path
    readme = (shape.SCHEMA_DIR / "README.md").read_text()
    row = next(line for line in readme.splitlines() if f"`{path.name}`" in line)
    assert "commit" in row and ("2026-03-06" in row or "2025-04" in row), row
    root = shape.SCHEMA_DIR.parents[2]
    if (root / ".git").exists():  # a checkout: the file must be tracked, or a clone lacks it
        tracked = subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch", str(path)],
                                 capture_output=True, text=True, check=False)  # fmt: skip
        assert tracked.returncode == 0, f"{path} is not tracked by git: {tracked.stderr}"


def test_a_missing_schema_is_a_failure_not_a_skip(tmp_path: Any) -> None:
    with pytest.raises(FileNotFoundError, match="missing from the repository"):
        shape.schema(tmp_path / "absent.graphql")
