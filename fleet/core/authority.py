"""Whose board input the fleet obeys, issue by issue: approval of work and the halt issue. Pure.

``fleet.core.trust`` says whether one author is trusted; this module applies it to what an issue carries:

* **predicate 12, approval** — an issue whose author is not trusted is not work until a trusted
  human comments a line starting with ``fleet:approve`` after the body's last edit and the last
  rename. The fleet's own identity and agent logins never approve (an agent must not queue its own
  work);
* **mentions** — only a trusted human's mention reaches an agent's brief; the others are listed in
  the run's log as not injected, with why (a stranger's comment must not become instructions to an
  agent that holds push and merge rights);
* **the halt issue** — an open issue with the halt title halts the fleet only when its author is
  trusted; a stranger's is named (``fleet-status``, the announcer) and never obeyed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from fleet.core.model import EventKind, Halt, HaltSource, Issue, Mention, Policy
from fleet.core.trust import APPROVE_TOKEN, is_approval


def approval_wait(issue: Issue, policy: Policy) -> str | None:
    """None when ``issue`` is work the fleet may take; else why it waits for approval."""
    trust = policy.trust
    why = trust.distrust(issue.author, issue.author_association)
    if why is None:
        return None
    stale: list[str] = []
    refused: list[str] = []
    edited = last_edit(issue)
    for c in issue.comments:
        if not is_approval(c.body):
            continue
        no = trust.steering(c.author, c.association, policy.identity)
        if no is not None:
            refused.append(f"{c.author}'s approval ignored: {no}")
        elif edited is not None and c.created_at < edited:
            stale.append(f"{c.author}'s approval predates the last edit of the body or title")
        else:
            return None
    extra = "; ".join(stale + refused)
    return f"opened by {why}; waits for a trusted person's comment line {APPROVE_TOKEN}" + (
        f" ({extra})" if extra else ""
    )


def last_edit(issue: Issue) -> datetime | None:
    """When the text an approval vouches for last changed: the body's last edit or a rename,
    whichever is later (both reach the brief)."""
    renames = [e.at for e in issue.events if e.kind is EventKind.RENAMED]
    stamps = [t for t in (issue.body_edited_at, *renames) if t is not None]
    return max(stamps) if stamps else None


@dataclass(frozen=True)
class IgnoredHalt:
    """An open halt-titled issue whose author the fleet does not obey."""

    issue: int
    author: str
    why: str

    def line(self) -> str:
        return f"halt issue #{self.issue} by {self.author or '?'} ignored: {self.why}"


def is_halt_title(title: str, halt_title: str) -> bool:
    return halt_key(title) == halt_key(halt_title)


def halt_key(title: str) -> str:
    """What of a title the halt switch compares: a sweep folds the configured title once."""
    return title.strip().casefold()


def halt_issues(
    issues: Iterable[Issue], policy: Policy
) -> tuple[tuple[Halt, ...], tuple[IgnoredHalt, ...]]:
    """(the halts in force, the halt issues ignored). A halt is a stop, the safe direction, so the
    fleet's own identity may file one (the operator with the fleet's tooling); agents may not."""
    halts: list[Halt] = []
    ignored: list[IgnoredHalt] = []
    title = halt_key(policy.halt_title)
    for i in issues:
        if not (i.is_open and halt_key(i.title) == title):
            continue
        why = policy.trust.distrust(i.author, i.author_association)
        if why is None:
            author = i.author or None
            halts.append(
                Halt(HaltSource.ISSUE, i.body.strip() or None, i.created_at, author, f"#{i.number}")
            )
        else:
            ignored.append(IgnoredHalt(i.number, i.author, why))
    return tuple(halts), tuple(ignored)


def sort_mentions(
    mentions: Iterable[Mention], policy: Policy
) -> tuple[tuple[Mention, ...], tuple[tuple[Mention, str], ...]]:
    """(the mentions a brief may carry, the others with why not). The fleet's own identity and
    agent logins are never injected: an agent must not write instructions for the next run."""
    kept: list[Mention] = []
    dropped: list[tuple[Mention, str]] = []
    for m in mentions:
        why = policy.trust.steering(m.author, m.association, policy.identity)
        if why is None:
            kept.append(m)
        else:
            dropped.append((m, why))
    return tuple(kept), tuple(dropped)
