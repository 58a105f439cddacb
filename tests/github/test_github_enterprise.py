"""GitHub Enterprise Server (#11 item 7): a server whose schema predates issue dependencies and
the items filter. The board asks once what the schema offers, sends only what it has, and names
each missing feature — instead of failing every read."""

from __future__ import annotations

import pytest

from fleet.board.github import GitHubBoard
from fleet.board.github.features import GITHUB_COM, ServerFeatures
from fleet.board.github.queries import OLDER_SERVER_DOCUMENTS
from tests.github import shape
from tests.github.backend import github_board
from tests.github.replay import Replayer


def test_an_older_server_is_read_without_the_fields_it_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    state = Replayer(schema_path=shape.OLDER_SCHEMA_PATH)
    board = github_board(state)  # not GitHub.com: the board asks
    a, b = board.create_issue("first"), board.create_issue("second")
    board.close(b)
    page = board.read()
    assert [i.number for i in page.issues] == [a]  # closed items filtered here, not by GitHub
    fresh = board.issue(a)
    assert fresh is not None and fresh.blocked_by == ()
    assert board.features == ServerFeatures(dependencies=False, items_filter=False)
    asked = [doc for doc, _ in state.answers if "query Features" in doc]
    assert len(asked) == 1  # once per board instance
    err = capsys.readouterr().err
    assert err.count("github-no-dependencies") == 1 and err.count("github-no-items-filter") == 1


def test_a_server_with_both_features_is_asked_once_and_github_com_never() -> None:
    state = Replayer()
    board = github_board(state, features=None)  # api.github.test is not GitHub.com: it asks
    assert board.features == GITHUB_COM and board.features == GITHUB_COM
    assert len(state.answers) == 1  # once per board instance
    dotcom = GitHubBoard(owner="o", repo="r", project_number=1, identity="i", token="t",
                         client=state.client())  # fmt: skip
    assert dotcom.features == GITHUB_COM and len(state.requests) == 1  # nothing sent


def test_today_the_full_documents_fail_on_the_older_schema() -> None:
    """Why the detection exists: the documents sent to GitHub.com are invalid there."""
    from graphql import parse, validate

    from fleet.board.github.queries import DOCUMENTS

    older = shape.schema(shape.OLDER_SCHEMA_PATH)
    assert validate(older, parse(DOCUMENTS["BOARD_PAGE"])) != []
    for name, doc in OLDER_SERVER_DOCUMENTS.items():
        assert validate(older, parse(doc)) == [], name
