"""GitHub's partial answers (issue #11 item 1): one item the token cannot see costs that item,
named with its reason, never the whole board; an error about the board itself still fails closed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.board.base import BoardUnreadable
from fleet.board.github.partial import BOARD_ITEMS, reason_of, split
from fleet.board.unseen import counts
from tests.github.backend import github_board
from tests.github.replay import Replayer


def test_an_unreadable_item_is_skipped_and_named_and_the_rest_is_read() -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    state.enqueue("POST", "/graphql", "graphql_board_page_partial")
    page = github_board(state, page_size=3).read()
    assert [i.number for i in page.issues] == [7]
    assert [(s.item, s.reason) for s in page.skipped] == [
        ("PVTI_lADOAAAAAM4AAAABzgAAAAX", "FORBIDDEN"),
        ("PVTI_lADOAAAAAM4AAAABzgAAAAY", "SAML"),
    ]
    assert "personal access token" in page.skipped[0].message
    assert counts(page.skipped) == {"FORBIDDEN": 1, "SAML": 1}


def test_an_error_about_the_board_itself_fails_the_read_closed() -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    state.enqueue("POST", "/graphql", "graphql_board_page_forbidden")
    with pytest.raises(BoardUnreadable, match="not accessible"):
        github_board(state).read()


_PATHS = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from([*BOARD_ITEMS, "content", "x"]), st.integers(0, 5)),
             max_size=7),
)  # fmt: skip


@given(st.lists(st.fixed_dictionaries({"path": _PATHS, "type": st.sampled_from(["FORBIDDEN",
                                       "NOT_FOUND", "RATE_LIMITED"])}), max_size=6))  # fmt: skip
def test_every_error_costs_one_item_or_the_whole_read(errors: list[dict]) -> None:
    per_item, whole = split(errors, BOARD_ITEMS)
    inside = [e for e in errors if isinstance(e["path"], list) and len(e["path"]) > 4
              and tuple(e["path"][:4]) == BOARD_ITEMS and isinstance(e["path"][4], int)]  # fmt: skip
    assert len(whole) == len(errors) - len(inside)  # nothing is lost between the two
    assert set(per_item) == {e["path"][4] for e in inside}


def test_reasons_are_named_from_githubs_own_fields() -> None:
    assert reason_of({"type": "NOT_FOUND", "message": "Could not resolve"}) == "NOT_FOUND"
    assert reason_of({"type": "FORBIDDEN", "message": "protected by organization SAML"}) == "SAML"
    assert reason_of({"message": "something else"}) == "ERROR"
