"""GitHub's partial answers: which errors cost one item, and which cost the whole read. Pure.

A GraphQL answer may carry ``data`` and ``errors`` together. On an organisation's board an item
from a repository the token cannot read comes back ``null`` at ``items.nodes[i].content`` with an
error whose ``path`` names that node (type ``FORBIDDEN`` or ``NOT_FOUND``); an organisation that
enforces SAML SSO does the same to a token not authorised for it. One such item must not make the
whole queue unreadable every cycle, so an error inside one node skips that node — named, with its
reason — and only an error about the board itself (no path, or a path above the list) fails the
read closed (D5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet.board.base import Skipped

# Where a board page's items sit in BOARD_PAGE's answer, and a candidate's lists in EDGES'.
BOARD_ITEMS = ("repositoryOwner", "projectV2", "items", "nodes")
EDGE_NODES = ("nodes",)
_MESSAGE_CHARS = 200


def reason_of(error: dict[str, Any]) -> str:
    """A short closed name for why an item was not readable. SAML enforcement arrives as a
    FORBIDDEN whose message names SAML: its remedy (authorise the token for the organisation's
    SSO) differs from a missing repository permission, so it gets its own name (D20)."""
    message = str(error.get("message", ""))
    if "SAML" in message:
        return "SAML"
    kind = error.get("type")
    return kind if isinstance(kind, str) and kind else "ERROR"


def split(
    errors: Sequence[dict[str, Any]], prefix: tuple[str, ...]
) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """Errors inside element ``i`` of the list at ``prefix`` -> ``{i: first error}``; every other
    error is about the whole answer and is returned in the second list."""
    per_item: dict[int, dict[str, Any]] = {}
    whole: list[dict[str, Any]] = []
    for error in errors:
        path = error.get("path")
        if (
            isinstance(path, list)
            and len(path) > len(prefix)
            and tuple(path[: len(prefix)]) == prefix
            and isinstance(path[len(prefix)], int)
            and not isinstance(path[len(prefix)], bool)
        ):
            per_item.setdefault(path[len(prefix)], error)
        else:
            whole.append(error)
    return per_item, whole


def skipped(item: str, error: dict[str, Any]) -> Skipped:
    return Skipped(item, reason_of(error), str(error.get("message", ""))[:_MESSAGE_CHARS])
