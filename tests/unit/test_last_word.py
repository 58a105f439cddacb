"""``fleet.core.last_word.latched_since``: the last word re-read under the fleet lock (the cancel window)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.core.last_word import latched_since
from fleet.core.markers import LATCHING, Kind
from tests.builders import FLEET, issue, marker

START, STOPPED = marker(Kind.START, {"run": "r1"}), marker(Kind.STOPPED, {"run": "r1"})


@pytest.mark.parametrize(
    ("before", "after", "refused"),
    [
        ([START, STOPPED], [START, STOPPED, marker(Kind.CANCELLED)], True),  # the cancel window
        ([], [marker(Kind.START)], True),  # another run started while we waited
        ([START, STOPPED], [START, STOPPED], False),  # nothing changed
        ([START, STOPPED], [START, STOPPED, marker(Kind.FAILED)], False),  # not a latch
        ([START, STOPPED, (c := marker(Kind.CANCELLED))], [START, STOPPED, c], False),  # override
    ],
    ids=["cancelled", "started", "same", "not-a-latch", "already-latched-at-the-fresh-read"],
)
def test_only_a_word_that_changed_into_a_latch_refuses(
    before: list, after: list, refused: bool
) -> None:
    why = latched_since(issue(7, timeline=before), issue(7, timeline=after), FLEET)
    assert (why is not None) is refused, why


def test_closed_while_waiting_refuses_and_unreadable_fails_open() -> None:
    before = issue(7, timeline=[START, STOPPED])
    assert "closed" in (latched_since(before, issue(7, state="closed"), FLEET) or "")
    assert latched_since(before, None, FLEET) is None  # D5: the re-check's own outage


def test_a_look_alike_from_someone_else_is_not_a_word() -> None:
    forged = marker(Kind.START, author="stranger")  # only the fleet posts a start
    assert latched_since(issue(7), issue(7, timeline=[forged]), FLEET) is None


@given(st.sampled_from(list(Kind)), st.sampled_from(list(Kind)))
def test_an_unchanged_last_word_never_refuses_and_a_new_latch_always_does(
    old: Kind, new: Kind
) -> None:
    history = [marker(old)]
    same = issue(7, timeline=history)
    assert latched_since(same, same, FLEET) is None
    why = latched_since(same, issue(7, timeline=[*history, marker(new)]), FLEET)
    assert (why is not None) is (new in LATCHING)
