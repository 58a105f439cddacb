"""The last word re-read under the fleet lock (checks 6/10): did it change into a latch? Pure.

A dispatch reads the issue fresh (checks 1-5), then syncs and waits for the fleet lock. A cancel
holds that same lock while it stops the unit and posts ``cancelled`` as the issue's last word. A
dispatch whose fresh read fell between the runner's ``stopped`` (not a latch) and the cancel's
``cancelled`` would otherwise take the lock the moment the cancel lets it go, probe no live unit
and start the cancelled issue again. So the issue is read once more inside the lock hold, and a
last word that changed since the fresh read into one of predicate 6's latches (a cancel, another
run's start, a success, ...) refuses with its own code (``LATCHED_UNDER_LOCK``).

Only a *change* refuses: a hand dispatch of an issue whose last word already latched at the fresh
read is the operator's override of the scheduler's predicates, and stays one.
"""

from __future__ import annotations

from fleet.core.markers import LATCHING, Marker, history
from fleet.core.model import Issue, Policy


def _last(issue: Issue, policy: Policy | str | None) -> Marker | None:
    return history(issue, policy).last_marker


def latched_since(before: Issue, now: Issue | None, policy: Policy | str | None) -> str | None:
    """Why ``now`` (the read under the lock) may not be launched, given ``before`` (the fresh read
    the checks passed on); None to go on. ``now`` None means it could not be read: the checks
    already passed on a fresh read, so the re-check fails open (D5) and the caller says so."""
    if now is None:
        return None
    if not now.is_open:
        return f"issue #{now.number} was closed while this dispatch waited for the fleet lock"
    was, last = _last(before, policy), _last(now, policy)
    if last is None or last.kind not in LATCHING:
        return None
    if was is not None and was.comment_id == last.comment_id:
        return None
    return (
        f"the last marker of #{now.number} became {last.kind.value} (comment {last.comment_id}) "
        "while this dispatch waited for the fleet lock: a newer word wins"
    )
