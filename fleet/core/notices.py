"""Steering the fleet did not obey, announced once on the issue it was tried on (issue 16). Pure.

A stranger's release line, reopen, hold or halt issue is ignored (``fleet.core.trust``); ignoring it
silently would look like a fleet that ignores its operators, and obeying it would hand the fleet to
anyone. So each attempt is named in ``fleet-status`` and, by the announcer, in one comment on the
issue where it was made — where the human who made it, and the maintainers, already look (D14).

"Once" needs no state file: a notice carries its key (the ignored comment's id, the reopen's time,
the halt issue's number), and a notice whose key already sits in one of the fleet's own comments
on that issue is not posted again. The notice is a plain comment, never a marker: it cannot become
the issue's last word (D6), and its quoted lines cannot release or approve anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.core.authority import halt_issues
from fleet.core.closing import defuse
from fleet.core.markers import history
from fleet.core.model import Issue, Snapshot, iso
from fleet.core.trust import fold


@dataclass(frozen=True)
class Notice:
    """One ignored attempt to steer the fleet, and the comment that names it."""

    issue: int
    key: str  # "comment-123" | "reopen-<time>" | "halt-12": the notice's identity on the issue
    subject: str  # "release by mallory"
    why: str

    @property
    def tag(self) -> str:
        return f"[fleet-notice {self.key}]"

    def text(self) -> str:
        body = (
            f"fleet: not obeyed: {self.subject} {self.tag}\n\n"
            f"{self.why}. The fleet took no action on it and will not.\n\n"
            "Only people the operator trusts give the fleet work, steer it or speak to its agents "
            "(the inventory's trust block; docs/security.md). A trusted person can do what was "
            "asked with their own comment or issue."
        )
        # Quoted back, a control line must stay inert: no line of a notice starts with a token.
        lines = [("> " + ln) if ln.lstrip().startswith("fleet:") and i else ln
                 for i, ln in enumerate(body.splitlines())]  # fmt: skip
        return defuse("\n".join(lines))


def notices(snap: Snapshot) -> tuple[Notice, ...]:
    """Every ignored attempt on the open issues of ``snap``, in issue order."""
    found: list[Notice] = []
    for issue in sorted((i for i in snap.issues if i.is_open), key=lambda i: i.number):
        for ig in history(issue, snap.policy).ignored:
            key = (
                f"comment-{ig.comment_id}" if ig.comment_id is not None else f"reopen-{iso(ig.at)}"
            )
            found.append(Notice(issue.number, key, f"{ig.what} by {ig.author or '?'}", ig.why))
    for h in halt_issues(snap.issues, snap.policy)[1]:
        found.append(Notice(h.issue, f"halt-{h.issue}", f"halt issue by {h.author or '?'}", h.why))
    return tuple(sorted(found, key=lambda n: (n.issue, n.key)))


def posted(issue: Issue, notice: Notice, identity: str) -> bool:
    """The fleet already named this attempt on the issue (only its own comments count)."""
    return any(fold(c.author) == fold(identity) and notice.tag in c.body for c in issue.comments)
