"""Which comments mention the fleet (D19). Pure: comments in, mentions out.

Mentions are read from the issue's own comments — never from GitHub's notification threads, which
are one per issue: a thread's ``reason`` stays ``mention`` and its ``latest_comment_url`` points at
the latest activity (often the fleet's own start marker), so a thread names neither which comments
were mentions nor how many (#11 item 2). Each backend keeps its own record of what was injected and
passes it as ``seen``; filters on top (trust, ``fleet.core.authority.sort_mentions``) take the result.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from fleet.core.markers import same_login
from fleet.core.model import Comment, Mention


def pattern(identity: str) -> re.Pattern[str]:
    """``@identity`` not glued to a word, an email address or a team (``@fleet/ops``); without
    case, as GitHub reads logins."""
    return re.compile(rf"(?<![\w@.])@{re.escape(identity)}(?![\w/-])", re.IGNORECASE)


def mentions(body: str, identity: str) -> bool:
    return pattern(identity).search(body) is not None


def select(
    issue: int, comments: Iterable[Comment], identity: str, seen: Collection[int] = ()
) -> tuple[Mention, ...]:
    """The comments of ``issue`` that mention ``identity``, are not the fleet's own, and are not
    in ``seen`` (already injected into a brief), oldest first."""
    found = pattern(identity)
    out = [
        Mention(c.id, issue, c.author, c.body, c.created_at, association=c.association)
        for c in comments
        if c.id not in seen and not same_login(c.author, identity) and found.search(c.body)
    ]
    return tuple(sorted(out, key=lambda m: (m.created_at, m.id)))
