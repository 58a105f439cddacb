"""Board items a read could not see, as ``fleet-status`` and ``--cost`` name them. Pure.

A GitHub board on an organisation may hold items from repositories the token cannot read; the
read keeps every readable item and names the rest (issue #11 item 1). An operator needs the count,
the reason and the fix — never a queue that silently shrank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.board.base import Skipped

# What an operator does about each reason (docs/github.md, "Items the token cannot read").
FIXES = {
    "FORBIDDEN": "give the token read access to the item's repository",
    "SAML": "authorise the token for the organisation's SAML single sign-on",
    "NOT_FOUND": "the item's repository is gone or hidden from the token; remove the item",
}
DEFAULT_FIX = "read the message; the item stays out of the queue until it can be read"


def counts(skipped: Sequence[Skipped]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in skipped:
        out[s.reason] = out.get(s.reason, 0) + 1
    return dict(sorted(out.items()))


def line(skipped: Sequence[Skipped]) -> str | None:
    """One status line, or None when the read saw everything."""
    if not skipped:
        return None
    parts = ", ".join(f"{reason} {n}" for reason, n in counts(skipped).items())
    fixes = "; ".join(FIXES.get(r, DEFAULT_FIX) for r in counts(skipped))
    return f"SKIPPED {len(skipped)} board item(s) the token cannot read ({parts}): {fixes}"


def as_json(skipped: Sequence[Skipped]) -> dict[str, Any]:
    return {
        "count": len(skipped),
        "reasons": counts(skipped),
        "items": [{"item": s.item, "reason": s.reason, "message": s.message} for s in skipped],
    }
