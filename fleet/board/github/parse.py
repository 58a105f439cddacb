"""GitHub's answers -> fleet's values. Pure: no I/O, no clock, every JSON type checked first (D5).

A shape we do not expect raises :class:`BadAnswer` (a :class:`BoardUnreadable`) naming the path, so
a changed API is one clear failure instead of an issue quietly read with no labels — a missing hold
label would make held work dispatchable (predicate 9).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleet.board.base import BoardUnreadable
from fleet.core.model import (
    Comment,
    Event,
    EventKind,
    Issue,
    IssueRef,
    IssueState,
    PRState,
    PullRequest,
    StateReason,
    parse_iso,
)
from fleet.core.trust import ASSOCIATIONS

GHOST = "ghost"  # GitHub's own name for the author of a deleted account (author: null)


class BadAnswer(BoardUnreadable):
    """An answer did not have the shape its document asked for."""


def obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadAnswer(f"{where}: expected an object, got {type(value).__name__}")
    return value


def seq(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise BadAnswer(f"{where}: expected a list, got {type(value).__name__}")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadAnswer(f"{where}: expected a string, got {type(value).__name__}")
    return value


def integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadAnswer(f"{where}: expected an integer, got {type(value).__name__}")
    return value


def when(value: Any, where: str) -> datetime:
    stamp = parse_iso(text(value, where))
    if stamp is None:
        raise BadAnswer(f"{where}: empty timestamp")
    return stamp


def nodes(connection: Any, where: str) -> list[dict[str, Any]]:
    """The non-null ``nodes`` of a connection (GitHub may null a node it cannot show you)."""
    return [n for n in seq(obj(connection, where).get("nodes"), f"{where}.nodes") if n is not None]


def login(actor: Any) -> str:
    return (
        actor["login"] if isinstance(actor, dict) and isinstance(actor.get("login"), str) else GHOST
    )


def repository_of(node: dict[str, Any], full_name: str, where: str) -> str:
    """'' for our own repository (compared case-insensitively, as GitHub does), else owner/name."""
    name = text(obj(node.get("repository"), f"{where}.repository").get("nameWithOwner"), where)
    return "" if name.lower() == full_name.lower() else name


def field_text(value: Any) -> str | None:
    """A project field's value as text: a single-select's option name or a text field's text."""
    if not isinstance(value, dict):
        return None
    for key in ("name", "text"):
        if isinstance(value.get(key), str):
            return value[key]
    return None


def state_reason(value: Any) -> StateReason | None:
    """GitHub's closed reasons onto fleet's two: a duplicate is not completed work."""
    if value == "COMPLETED":
        return StateReason.COMPLETED
    if value in ("NOT_PLANNED", "DUPLICATE"):
        return StateReason.NOT_PLANNED
    return None  # REOPENED or null: the issue is open, or GitHub recorded no reason


def issue_state(value: Any, where: str) -> IssueState:
    if value == "OPEN":
        return IssueState.OPEN
    if value == "CLOSED":
        return IssueState.CLOSED
    raise BadAnswer(f"{where}: unknown issue state {value!r}")


def ref(node: Any, full_name: str, where: str) -> IssueRef:
    node = obj(node, where)
    return IssueRef(
        number=integer(node.get("number"), f"{where}.number"),
        state=issue_state(node.get("state"), f"{where}.state"),
        repository=repository_of(node, full_name, where),
    )


def refs(connection: Any, full_name: str, where: str) -> tuple[IssueRef, ...]:
    return tuple(ref(n, full_name, where) for n in nodes(connection, where))


def association(value: Any, where: str) -> str:
    """``authorAssociation``: who the author is to the repository. Trust keys on it, so an answer
    without one is a changed API, not a stranger (a missing value would silently distrust)."""
    if not isinstance(value, str) or value not in ASSOCIATIONS:
        raise BadAnswer(f"{where}: unknown authorAssociation {value!r}")
    return value


def comments(items: Sequence[Any], where: str) -> tuple[Comment, ...]:
    out = []
    for node in items:
        node = obj(node, where)
        out.append(
            Comment(
                id=integer(node.get("databaseId"), f"{where}.databaseId"),
                author=login(node.get("author")),
                body=text(node.get("body"), f"{where}.body"),
                created_at=when(node.get("createdAt"), f"{where}.createdAt"),
                association=association(
                    node.get("authorAssociation"), f"{where}.authorAssociation"
                ),
            )
        )
    return tuple(sorted(out, key=lambda c: (c.created_at, c.id)))


def events(connection: Any, where: str) -> tuple[Event, ...]:
    """Close/reopen history (a reopen outranks every older marker, D6) and label changes."""
    out = []
    for node in nodes(connection, where):
        kind = node.get("__typename")
        at = when(node.get("createdAt"), f"{where}.createdAt")
        if kind == "ClosedEvent":
            reason = state_reason(node.get("stateReason"))
            detail = reason.value if reason else ""
            out.append(Event(EventKind.CLOSED, at, login(node.get("actor")), detail))
        elif kind == "ReopenedEvent":
            out.append(Event(EventKind.REOPENED, at, login(node.get("actor"))))
        elif kind == "RenamedTitleEvent":
            out.append(Event(EventKind.RENAMED, at, login(node.get("actor"))))
        elif kind in ("LabeledEvent", "UnlabeledEvent"):
            label = obj(node.get("label"), f"{where}.label").get("name")
            which = EventKind.LABELED if kind == "LabeledEvent" else EventKind.UNLABELED
            out.append(Event(which, at, login(node.get("actor")), text(label, f"{where}.label")))
    return tuple(sorted(out, key=lambda e: e.at))


def issue(
    node: Any,
    *,
    full_name: str,
    status: str | None,
    lane: str | None,
    blocked_by: tuple[IssueRef, ...] = (),
    sub_issues: tuple[IssueRef, ...] = (),
    older_comments: Sequence[Any] = (),
) -> Issue:
    """One ``IssueFields`` answer as an :class:`Issue`. Lists not fetched stay empty."""
    where = "issue"
    node = obj(node, where)
    number = integer(node.get("number"), "issue.number")
    where = f"issue #{number}"
    labels = obj(node.get("labels"), f"{where}.labels")
    names = tuple(text(n.get("name"), f"{where}.labels") for n in nodes(labels, f"{where}.labels"))
    if integer(labels.get("totalCount"), f"{where}.labels.totalCount") > len(names):
        raise BadAnswer(f"{where}: more labels than one page holds; a hold label could be unseen")
    state = issue_state(node.get("state"), f"{where}.state")
    parent = node.get("parent")
    page = nodes(node.get("comments"), f"{where}.comments")
    return Issue(
        number=number,
        title=text(node.get("title"), f"{where}.title"),
        body=text(node.get("body"), f"{where}.body"),
        state=state,
        state_reason=state_reason(node.get("stateReason")) if state is IssueState.CLOSED else None,
        labels=names,
        assignees=tuple(login(n) for n in nodes(node.get("assignees"), f"{where}.assignees")),
        status=status,
        lane=lane,
        parent=ref(parent, full_name, f"{where}.parent") if parent is not None else None,
        blocked_by=blocked_by,
        sub_issues=sub_issues,
        comments=comments([*older_comments, *page], f"{where}.comments"),
        events=events(node.get("timelineItems"), f"{where}.timelineItems"),
        created_at=when(node.get("createdAt"), f"{where}.createdAt"),
        updated_at=when(node.get("updatedAt"), f"{where}.updatedAt"),
        closed_at=parse_iso(node["closedAt"]) if isinstance(node.get("closedAt"), str) else None,
        author=login(node.get("author")),
        author_association=association(node.get("authorAssociation"), f"{where}.authorAssociation"),
        body_edited_at=when(node["lastEditedAt"], f"{where}.lastEditedAt")
        if node.get("lastEditedAt") is not None
        else None,
    )


def has_edges(node: dict[str, Any]) -> bool:
    """Whether the page's summaries say this issue has sub-issues or blockers to list."""
    subs = node.get("subIssuesSummary")
    deps = node.get("issueDependenciesSummary")
    total_subs = subs.get("total", 0) if isinstance(subs, dict) else 0
    total_deps = deps.get("totalBlockedBy", 0) if isinstance(deps, dict) else 0
    return bool(total_subs) or bool(total_deps)


def pull_request(node: Any, full_name: str) -> PullRequest:
    """One closing reference. ``merged`` is checked here from ``merged`` AND ``mergedAt`` (D2):
    a state string alone never makes a success."""
    node = obj(node, "pull request")
    number = integer(node.get("number"), "pull request.number")
    where = f"pull request #{number}"
    merged_at = node.get("mergedAt")
    merged = node.get("merged") is True and isinstance(merged_at, str)
    raw = node.get("state")
    if merged:
        state = PRState.MERGED
    elif raw == "OPEN":
        state = PRState.OPEN
    elif raw in ("CLOSED", "MERGED"):
        state = PRState.CLOSED  # "MERGED" without merged/mergedAt is not evidence of a merge
    else:
        raise BadAnswer(f"{where}: unknown state {raw!r}")
    return PullRequest(
        number=number,
        title=text(node.get("title"), f"{where}.title"),
        body=text(node.get("body"), f"{where}.body"),
        branch=text(node.get("headRefName"), f"{where}.headRefName"),
        state=state,
        merged=merged,
        created_at=when(node.get("createdAt"), f"{where}.createdAt"),
        merged_at=parse_iso(merged_at) if merged else None,
        repository=repository_of(node, full_name, where),
        author=login(node.get("author")),
    )
