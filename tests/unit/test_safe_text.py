"""Board text printed to a terminal carries no control or bidi character (fleet.core.safe_text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.safe_text import BIDI, SEPARATORS, printable

FAST = settings(max_examples=300, deadline=None)


def _dangerous(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o < 0xA0 or ch in BIDI or ch in SEPARATORS


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;pwned\x07Fix it", "\\x1b]0;pwned\\x07Fix it"),  # sets the terminal title
        ("ok\x1b[2K\x1b[1A#3 success", "ok\\x1b[2K\\x1b[1A#3 success"),  # rewrites a status line
        ("invoice\u202etxt.exe", "invoice\\u202etxt.exe"),  # reads backwards
        ("a\nb\r", "a\\x0ab\\x0d"),
        ("ünïcödé ✔ 修正 🚀", "ünïcödé ✔ 修正 🚀"),
    ],
)
def test_controls_and_bidi_are_shown_never_obeyed(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_lines_keeps_newlines_and_tabs_only() -> None:
    assert printable("a\n\tb\x1b[0m\u2028", lines=True) == "a\n\tb\\x1b[0m\\u2028"


@FAST
@given(st.text())
def test_nothing_dangerous_survives_and_safe_text_is_untouched(text: str) -> None:
    out = printable(text)
    assert not any(_dangerous(ch) for ch in out)
    if not any(_dangerous(ch) for ch in text):
        assert out == text
    multi = printable(text, lines=True)
    assert not any(_dangerous(ch) and ch not in "\n\t" for ch in multi)
    assert multi.count("\n") == text.count("\n")
