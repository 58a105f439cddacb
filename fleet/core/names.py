"""The unit name ``task-<issue>``: the lock (D4), built and parsed here and nowhere else.

Its own module, with nothing but ``re``, because the portable supervisor's worker side
(``python -m fleet.units``) needs the name and is started once per claim: importing the value
types of ``fleet.core.model`` beside it would put their class definitions into every claim's
start-up. ``fleet.core.model`` re-exports these names for everyone else.
"""

from __future__ import annotations

import re

UNIT_PREFIX = "task-"
_UNIT_RE = re.compile(r"^task-([1-9][0-9]*)(?:\.service)?$")


def check_issue(issue: int) -> int:
    """Refuse anything but a positive int issue number (bad input gets a clear error)."""
    if isinstance(issue, bool) or not isinstance(issue, int) or issue <= 0:
        raise ValueError(f"issue must be a positive int, got {issue!r}")
    return issue


def unit_name(issue: int) -> str:
    """``task-<issue>``: zero entropy, because the name *is* the lock (D4)."""
    return f"{UNIT_PREFIX}{check_issue(issue)}"


def issue_of(name: str) -> int | None:
    """The issue number in a unit name (``task-42`` or ``task-42.service``); None if it is not one.

    Every unit name this parser meets must round-trip: entropy in the name once made the
    anti-duplicate predicate silently extract nothing from eleven live units (D4, D20).
    """
    match = _UNIT_RE.match(name.strip())
    return int(match.group(1)) if match else None
