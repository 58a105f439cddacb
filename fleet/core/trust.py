"""Who the fleet listens to: the trust rule, pure (issue 16, docs/security.md).

On a public repository anyone can open an issue or comment, and the board is how the fleet is
steered. So every input that gives the fleet work, steers it or speaks to its agents is weighed by
its author here, and only here:

* **work** — an issue whose author is not trusted waits (predicate 12, ``unapproved``) until a
  trusted person comments a line starting with :data:`APPROVE_TOKEN` *after* the issue's body was
  last edited or renamed (an approval of a text its author later rewrote approves nothing);
* **steering** — a halt issue, a release line, a hold (park) or cancel marker posted by a human, and
  a reopen count only from a trusted **human**: never from the fleet's own identity (the fleet never
  releases itself) nor from an ``agent_logins`` identity (an agent, or a prompt injected into one,
  must not buy itself attempts);
* **speaking to agents** — only trusted authors' mentions reach a brief.

Trust is a login (compared case-insensitively, as GitHub compares logins) on the allow list, or —
on GitHub — an ``authorAssociation`` the operator counts (default OWNER, MEMBER, COLLABORATOR: the
line claude-code-action draws at write access). On the embedded board there are no associations;
its allow list defaults to everyone, because the board is a file on the operator's own box.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

APPROVE_TOKEN = "fleet:approve"
_APPROVE = re.compile(rf"^{re.escape(APPROVE_TOKEN)}(?![\w-])", re.MULTILINE)

# GitHub's CommentAuthorAssociation values (GraphQL enum; REST author_association).
ASSOCIATIONS = (
    "OWNER",
    "MEMBER",
    "COLLABORATOR",
    "CONTRIBUTOR",
    "FIRST_TIME_CONTRIBUTOR",
    "FIRST_TIMER",
    "MANNEQUIN",
    "NONE",
)
# Write access or more: the repository's owner, its organisation's members, invited collaborators.
DEFAULT_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


def is_approval(body: str) -> bool:
    """An approval token at the start of a line (quoting it back approves nothing)."""
    return _APPROVE.search(body) is not None


def fold(login: str) -> str:
    return login.strip().casefold()


@dataclass(frozen=True)
class Trust:
    """The operator's trust rule. ``allow`` None = everyone (the embedded board's default);
    ``associations`` None = the board has none (the embedded board)."""

    allow: tuple[str, ...] | None = None  # case-folded logins, sorted (tuples: the trace codec)
    associations: tuple[str, ...] | None = None
    agent_logins: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        allow: Iterable[str] | None = None,
        associations: Iterable[str] | None = None,
        agent_logins: Iterable[str] = (),
    ) -> Trust:
        return cls(
            allow=None if allow is None else tuple(sorted({fold(a) for a in allow})),
            associations=None if associations is None else tuple(sorted(set(associations))),
            agent_logins=tuple(sorted({fold(a) for a in agent_logins})),
        )

    def distrust(self, login: str, association: str | None) -> str | None:
        """None when ``login`` is trusted; else why not, in the operator's words."""
        if self.allow is None and self.associations is None and not self.agent_logins:
            return None  # everyone is trusted (the embedded default): no login to fold
        who = fold(login)
        if who and who in self.agent_logins:
            return f"{login} is an agent login (trust.agent_logins): agents never steer the fleet"
        if self.allow is None and self.associations is None:
            return None
        if not who:
            return "no author recorded"
        if self.allow is not None and who in self.allow:
            return None
        if self.associations is not None and association in self.associations:
            return None
        assoc = f"association {association}" if association else "association unknown"
        counted = ", ".join(self.associations) if self.associations else "none"
        return f"{login} ({assoc}) is not trusted (counted: {counted}; not on trust.allow)"

    def trusts(self, login: str, association: str | None) -> bool:
        return self.distrust(login, association) is None

    def steering(self, login: str, association: str | None, identity: str) -> str | None:
        """None when ``login`` may steer the fleet; else why not. The fleet's own identity never
        steers: every marker it posts is its own bookkeeping, and an agent holding its credential
        must not release its own latch."""
        if fold(login) == fold(identity):
            return f"{login} is the fleet's own identity, which never releases or steers itself"
        return self.distrust(login, association)


EVERYONE = Trust()
