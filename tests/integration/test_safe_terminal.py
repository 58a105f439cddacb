"""Board text reaches the operator's terminal escaped (issue 16): a hostile title, body and comment
run through the production CLI in its own process — fleet-status, schedule, board.list,
board.show, dispatch — and no control or bidi character comes out."""

from __future__ import annotations

import pytest

from fleet.core.safe_text import BIDI
from tests.integration.fleet_fixture import fleet_cli

pytestmark = pytest.mark.timeout(180)

HOSTILE = "Fix\x1b]0;owned\x07 it\x1b[2K\x1b[1A\u202etxt.exe\rdone"


def _clean(text: str) -> bool:
    return not any((ord(c) < 0x20 and c not in "\n\t") or c in BIDI or c == "\x7f" for c in text)


@pytest.mark.parametrize(
    "argv",
    [
        ("fleet-status",),
        ("schedule",),
        ("board.list",),
        ("board.show", "1"),
        ("dispatch", "1", "--dry-run"),
    ],
)
def test_a_hostile_title_is_shown_never_obeyed(fleet, argv) -> None:  # type: ignore[no-untyped-def]
    n = fleet.board.create_issue(HOSTILE, f"body {HOSTILE}")
    assert n == 1
    fleet.board.comment(n, f"comment {HOSTILE}", author="stranger")

    res = fleet_cli(fleet, *argv)

    out = res.stdout + res.stderr
    assert _clean(out), repr(out)
    if argv[0] in ("fleet-status", "board.list", "board.show"):
        assert "\\x1b]0;owned\\x07" in res.stdout and "\\u202e" in res.stdout
