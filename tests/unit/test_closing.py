"""The closing-reference adjacency rule (D16) and defusing generated text (D14)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.closing import (
    MAX_ISSUE_NUMBER,
    ClosingRef,
    closes,
    closing_refs,
    defuse,
    has_live_keyword,
)
from tests.builders import CLOSING_TEXT

FAST = settings(max_examples=200, deadline=None)


ADJACENCY = [
    # (text, the references it closes as (number, repository))
    ("Closes #12", [(12, "")]),
    ("closes #12", [(12, "")]),
    ("CLOSED #12", [(12, "")]),
    ("fix #1", [(1, "")]),
    ("fixes: #3", [(3, "")]),
    ("Fixed:\t#3", [(3, "")]),
    ("resolve\n#4", [(4, "")]),
    ("> resolves owner/repo#9", [(9, "owner/repo")]),
    ("Resolves Owner/Repo#9", [(9, "owner/repo")]),
    ("`closes #5`", [(5, "")]),
    ("fixes #1 and #2", [(1, "")]),
    ("fixes #1, fixes #2, closes #1", [(1, ""), (2, "")]),
    ("This PR fixes the failing criterion from VERIFY #6038", []),
    ("fixes issue #3", []),
    ("prefixes #3", []),
    ("un-fix #3", []),
    ("suffix/fixes #3", []),
    ("closes#3", []),
    ("closes #3abc", []),
    ("closes # 3", []),
    ("closes #\u20603", []),
    ("see #12", []),
    ("", []),
]


@pytest.mark.parametrize(
    ("text", "refs"), ADJACENCY, ids=[repr(t) if t else "empty" for t, _ in ADJACENCY]
)
def test_adjacency_rule(text: str, refs: list[tuple[int, str]]) -> None:
    """D16: the keyword must sit immediately before the reference, as the forge reads it."""
    assert [(r.number, r.repository) for r in closing_refs(text)] == refs
    assert has_live_keyword(text) is bool(refs)


@pytest.mark.parametrize(
    ("text", "number", "repository", "expected"),
    [
        ("Closes #12", 12, "", True),
        ("Closes #12", 12, "owner/repo", True),
        ("Closes #12", 1, "", False),
        ("Closes other/repo#12", 12, "owner/repo", False),
        ("Closes OWNER/repo#12", 12, "owner/REPO", True),
        ("fixes the thing in #12", 12, "", False),
    ],
    ids=["same-repo", "bare-ref-is-own-repo", "other-number", "other-repo", "repo-case", "not-adj"],
)
def test_closes(text: str, number: int, repository: str, expected: bool) -> None:
    """A cross-repository reference cannot close our issue (D6's tombstone cause)."""
    assert closes(text, number, repository) is expected


def test_closing_ref_same_repo() -> None:
    assert ClosingRef(1, "").same_repo("a/b")
    assert ClosingRef(1, "a/b").same_repo("A/B")
    assert not ClosingRef(1, "a/c").same_repo("a/b")


@pytest.mark.parametrize(
    "text",
    ["Closes #12", "fixes: #3", "> resolves owner/repo#9", "fix #1 fix #2", "closes #1 #2"],
    ids=["closes", "fixes-colon", "quoted-cross-repo", "two", "list"],
)
def test_defuse_keeps_text_readable_and_inert(text: str) -> None:
    """D14: the remedy still reads as written; only the reference stops being one."""
    out = defuse(text)
    assert not has_live_keyword(out)
    assert out.replace("\u2060", "") == text


def test_defuse_leaves_harmless_text_alone() -> None:
    text = "see #12; fixes the criterion from VERIFY #6038"
    assert defuse(text) == text


@FAST
@given(CLOSING_TEXT)
def test_closing_refs_never_raises_and_agrees_with_has_live_keyword(text: str) -> None:
    refs = closing_refs(text)
    assert has_live_keyword(text) is bool(refs)
    assert len(set(refs)) == len(refs)
    for r in refs:
        assert r.number >= 0 and r.repository == r.repository.lower()
        assert closes(text, r.number, r.repository or "any/repo")


@FAST
@given(CLOSING_TEXT)
def test_defuse_never_leaves_a_live_keyword(text: str) -> None:
    out = defuse(text)
    assert not has_live_keyword(out)
    assert closing_refs(out) == ()
    # Only zero-width joiners are added: what a human reads is unchanged.
    assert out.replace("\u2060", "") == text.replace("\u2060", "")
    assert defuse(out) == out


# -- the bound: agent and board text never escapes as a crash (issue 16) --------------------------

BOUNDS = [
    (f"fixes #{MAX_ISSUE_NUMBER}", [(MAX_ISSUE_NUMBER, "")]),
    (f"fixes #{MAX_ISSUE_NUMBER + 1}", []),
    ("fixes #99999999999999999999", []),  # past SQLite's 64-bit integer
    ("fixes #" + "9" * 5000, []),  # past Python's int-from-string limit
    ("fixes #" + "1" * 5000 + " and fixes #7", [(7, "")]),
    ("fixes #00000000012", []),  # eleven digits is not a reference, whatever its value
]


@pytest.mark.parametrize(("text", "refs"), BOUNDS)
def test_a_reference_is_bounded_like_an_issue_number(text: str, refs: list) -> None:
    assert [(r.number, r.repository) for r in closing_refs(text)] == refs
    assert has_live_keyword(text) is bool(refs)


DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=6000)
SEPARATORS = st.sampled_from(["fixes #", "closes: #", "Resolves o/r#", " #", "#", "\n", " "])


@FAST
@given(st.lists(st.one_of(DIGITS, SEPARATORS, st.text(max_size=20)), max_size=8).map("".join))
def test_no_crafted_reference_escapes_as_a_crash(text: str) -> None:
    refs = closing_refs(text)
    assert all(0 <= r.number <= MAX_ISSUE_NUMBER for r in refs)
    assert has_live_keyword(text) is bool(refs)
    out = defuse(text)
    assert closing_refs(out) == () and not has_live_keyword(out)
