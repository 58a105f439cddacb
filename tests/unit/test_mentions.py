"""Which comments mention the fleet (fleet/core/mentions.py): a pure selection the trust filter sits on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from fleet.core.mentions import mentions, select
from fleet.core.model import Comment

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _c(cid: int, author: str, body: str) -> Comment:
    return Comment(cid, author, body, T0 + timedelta(seconds=cid), association="MEMBER")


def test_mentions_are_whole_logins_without_case() -> None:
    assert mentions("hi @Fleet-Bot, go", "fleet-bot")
    assert mentions("(@fleet-bot)", "fleet-bot")
    assert not mentions("mail fleet-bot@example.com", "fleet-bot")
    assert not mentions("@fleet-botwood", "fleet-bot")
    assert not mentions("@fleet-bot/ops team", "fleet-bot")
    assert not mentions("x@fleet-bot", "fleet-bot")


def test_select_skips_the_fleets_own_comments_and_the_seen_ones() -> None:
    comments = [_c(1, "alice", "@fleet do A"), _c(2, "FLEET", "@fleet note to self"),
                _c(3, "bob", "@fleet do B"), _c(4, "carol", "no mention")]  # fmt: skip
    got = select(7, comments, "fleet", seen={1})
    assert [(m.id, m.issue, m.author, m.association) for m in got] == [(3, 7, "bob", "MEMBER")]


@given(st.lists(st.tuples(st.sampled_from(["alice", "fleet", "Fleet"]),
                          st.sampled_from(["@fleet hi", "hi", "@FLEET go", "a@fleet"])),
                max_size=12), st.sets(st.integers(0, 12)))  # fmt: skip
def test_every_selected_mention_is_unseen_foreign_and_mentions(rows, seen) -> None:
    comments = [_c(i, a, b) for i, (a, b) in enumerate(rows)]
    got = select(1, comments, "fleet", seen)
    expected = [c.id for c in comments
                if c.id not in seen and c.author.lower() != "fleet" and mentions(c.body, "fleet")]  # fmt: skip
    assert [m.id for m in got] == expected
