"""The replayer's GraphQL side: resolvers over its state for graphql-core to execute GitHub's
published schema with. Values are dicts; a field with arguments is a callable
``(info, **args)``, which graphql-core's default resolver calls; ``__typename`` keys tell it
which member of a union or interface a dict is.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from graphql import GraphQLError

if TYPE_CHECKING:
    from tests.github.replay import Replayer
    from tests.github.replay_state import FakeIssue, FakePR

_TIMELINE = {"CLOSED_EVENT": "ClosedEvent", "REOPENED_EVENT": "ReopenedEvent",
             "LABELED_EVENT": "LabeledEvent", "UNLABELED_EVENT": "UnlabeledEvent",
             "RENAMED_TITLE_EVENT": "RenamedTitleEvent"}  # fmt: skip


# REST's reaction names -> GraphQL's ReactionContent
_REACTIONS = {"+1": "THUMBS_UP", "-1": "THUMBS_DOWN", "laugh": "LAUGH", "hooray": "HOORAY",
              "confused": "CONFUSED", "heart": "HEART", "rocket": "ROCKET", "eyes": "EYES"}  # fmt: skip


def _matches(query: str, issue: FakeIssue) -> bool:
    """The project view's filter qualifiers the board sends (``is:issue is:open``); any other
    qualifier is refused, so the replayer never pretends to filter what it does not model."""
    for word in query.split():
        if word == "is:issue":
            continue
        if word in ("is:open", "is:closed"):
            if issue.state != word[3:]:
                return False
            continue
        raise AssertionError(f"the replayer does not model the filter {word!r}")
    return True


def github_error(error: GraphQLError) -> dict[str, Any]:
    """graphql-core's error in GitHub's envelope: ``type`` at the top level, no ``extensions``."""
    out = error.formatted
    extensions = out.pop("extensions", None) or {}
    if "type" in extensions:
        out = {"type": extensions["type"], **out}
    return out


def cursor(index: int) -> str:
    return base64.b64encode(f"cursor:v2:{index}".encode()).decode()


def _index(value: str) -> int:
    return int(base64.b64decode(value).decode().rsplit(":", 1)[1])


def connection(items_of: Callable[..., Sequence[Any]]) -> Callable[..., dict[str, Any]]:
    """A Relay connection over ``items_of(**filters)`` with first/last/after/before slicing."""

    def resolve(info: Any, first: int | None = None, last: int | None = None,
                after: str | None = None, before: str | None = None, **filters: Any) -> Any:  # fmt: skip
        assert first is not None or last is not None, "GitHub requires first or last"
        assert 1 <= (first or last or 0) <= 100, "GitHub allows first/last of 1-100"
        items = list(items_of(**filters))
        lo = _index(after) + 1 if after else 0
        hi = _index(before) if before else len(items)
        window = list(range(lo, hi))
        if first is not None:
            window = window[:first]
        if last is not None:
            window = window[-last:]
        return {
            "totalCount": len(items),
            "nodes": [items[i] for i in window],
            "edges": [{"cursor": cursor(i), "node": items[i]} for i in window],
            "pageInfo": {
                "hasNextPage": bool(window) and window[-1] < hi - 1,
                "hasPreviousPage": bool(window) and window[0] > lo,
                "startCursor": cursor(window[0]) if window else None,
                "endCursor": cursor(window[-1]) if window else None,
            },
        }

    return resolve


class Root:
    """Query and Mutation root of one GraphQL request."""

    def __init__(self, state: Replayer, cost: int) -> None:
        self.s = state
        self.cost = cost

    # -- Query -----------------------------------------------------------------------------------

    def rateLimit(self, info: Any, dryRun: bool = False) -> dict[str, Any]:
        return {"cost": self.cost, "remaining": self.s.remaining, "limit": 5000,
                "used": 5000 - self.s.remaining, "nodeCount": 0,
                "resetAt": "2030-01-01T00:00:00Z"}  # fmt: skip

    def viewer(self, info: Any) -> dict[str, Any]:
        """The token's user, as GitHub spells the login (which may differ in case, #11 item 3)."""
        return {"__typename": "User", "login": self.s.token_login}

    def repositoryOwner(self, info: Any, login: str) -> dict[str, Any] | None:
        if login.lower() != self.s.owner.lower():
            return None
        return {"__typename": "Organization", "id": "O_kgDOREPLAY", "login": self.s.owner,
                "projectV2": self._project}  # fmt: skip

    def repository(self, info: Any, owner: str, name: str, **_: Any) -> dict[str, Any] | None:
        if f"{owner}/{name}".lower() != self.s.full_name.lower():
            return None
        return {"nameWithOwner": self.s.full_name, "issue": self._issue_by_number}

    def nodes(self, info: Any, ids: list[str]) -> list[Any]:
        by_id = {i.node_id: i for i in self.s.issues.values()}
        return [self.issue(by_id[i]) if i in by_id else None for i in ids]

    def node(self, info: Any, id: str) -> Any:
        return self.nodes(info, [id])[0]

    # -- Mutation --------------------------------------------------------------------------------

    def addProjectV2ItemById(self, info: Any, input: dict[str, Any]) -> Any:
        assert input["projectId"] == self.s.project_id
        (issue,) = [i for i in self.s.issues.values() if i.node_id == input["contentId"]]
        issue.item_id = issue.item_id or f"PVTI_REPLAY{issue.number:05d}"
        return {"item": self._item(issue)}

    def updateProjectV2ItemFieldValue(self, info: Any, input: dict[str, Any]) -> Any:
        issue, name = self._item_field(input)
        value = input["value"]
        if "singleSelectOptionId" in value:
            options = {o["id"]: o["name"] for o in self._options(name)}
            if value["singleSelectOptionId"] not in options:
                raise GraphQLError("Option not found", extensions={"type": "UNPROCESSABLE"})
            issue.fields[name] = options[value["singleSelectOptionId"]]
        else:
            issue.fields[name] = value["text"]
        return {"projectV2Item": self._item(issue)}

    def clearProjectV2ItemFieldValue(self, info: Any, input: dict[str, Any]) -> Any:
        issue, name = self._item_field(input)
        issue.fields.pop(name, None)
        return {"projectV2Item": self._item(issue)}

    # -- objects ---------------------------------------------------------------------------------

    def _item_field(self, input: dict[str, Any]) -> tuple[FakeIssue, str]:
        (issue,) = [i for i in self.s.issues.values() if i.item_id == input["itemId"]]
        (name,) = [f["name"] for f in self._fields() if f["id"] == input["fieldId"]]
        return issue, name

    def _options(self, name: str) -> list[dict[str, str]]:
        names = self.s.status_options if name == "Status" else self.s.lane_options
        return [{"id": f"opt-{name}-{k}", "name": n} for k, n in enumerate(names)]

    def _fields(self) -> list[dict[str, Any]]:
        single = "ProjectV2SingleSelectField"
        lane_type = single if self.s.lane_kind == "SINGLE_SELECT" else "ProjectV2Field"
        out = [
            {"__typename": "ProjectV2Field", "id": "PVTF_title", "name": "Title",
             "dataType": "TITLE"},
            {"__typename": single, "id": "PVTSSF_status", "name": "Status",
             "dataType": "SINGLE_SELECT"},
            {"__typename": lane_type, "id": "PVTF_lane", "name": "Lane",
             "dataType": self.s.lane_kind},
        ]  # fmt: skip
        for f in out:
            if f["__typename"] == single:
                f["options"] = lambda info, names=None, n=f["name"]: self._options(n)
        return out

    def _project(self, info: Any, number: int) -> dict[str, Any] | None:
        if number != self.s.project_number:
            return None

        def on_board(query: str = "", **_: Any) -> list[dict[str, Any]]:
            return [self._item(i) for i in self.s.issues.values()
                    if i.item_id and _matches(query, i)]  # fmt: skip

        return {"id": self.s.project_id, "number": number, "title": "fleet",
                "items": connection(on_board), "fields": connection(lambda **_: self._fields())}  # fmt: skip

    def _item(self, issue: FakeIssue) -> dict[str, Any]:
        def value(info: Any, name: str) -> dict[str, Any] | None:
            if name not in issue.fields:
                return None
            if name == "Status" or self.s.lane_kind == "SINGLE_SELECT":
                return {"__typename": "ProjectV2ItemFieldSingleSelectValue",
                        "name": issue.fields[name]}  # fmt: skip
            return {"__typename": "ProjectV2ItemFieldTextValue", "text": issue.fields[name]}

        return {"id": issue.item_id, "isArchived": False, "type": "ISSUE",
                "fieldValueByName": value, "content": lambda info: self.issue(issue),
                "project": {"id": self.s.project_id, "number": self.s.project_number}}  # fmt: skip

    def _issue_by_number(self, info: Any, number: int) -> Any:
        if number not in self.s.issues:
            raise GraphQLError(f"Could not resolve to an Issue with the number of {number}.",
                               extensions={"type": "NOT_FOUND"})  # fmt: skip
        return self.issue(self.s.issues[number])

    def _actor(self, login: str) -> dict[str, str]:
        return {"__typename": "User", "login": login}

    def issue(self, i: FakeIssue) -> dict[str, Any]:
        s = self.s
        subs = [c for c in s.issues.values() if c.parent == i.number]
        blockers = [s.issues[n] for n in i.blocked_by]
        ref = self._ref
        return {
            "__typename": "Issue", "id": i.node_id, "databaseId": i.db_id, "number": i.number,
            "title": i.title, "body": i.body, "state": i.state.upper(),
            "stateReason": (i.state_reason or "").upper() or None,
            "createdAt": _ts(i.created_at), "updatedAt": _ts(i.updated_at or i.created_at),
            "closedAt": _ts(i.closed_at) if i.closed_at else None,
            "lastEditedAt": _ts(i.edited_at) if i.edited_at else None,
            "author": self._actor(i.author), "authorAssociation": i.association,
            "repository": {"nameWithOwner": s.full_name},
            "labels": connection(lambda **_: [{"name": n} for n in i.labels]),
            "assignees": connection(lambda **_: [{"login": a} for a in i.assignees]),
            "parent": ref(s.issues[i.parent]) if i.parent else None,
            "subIssuesSummary": {"total": len(subs), "percentCompleted": 0,
                                 "completed": sum(c.state == "closed" for c in subs)},
            "issueDependenciesSummary": {
                "blockedBy": sum(b.state == "open" for b in blockers),
                "totalBlockedBy": len(blockers), "blocking": 0, "totalBlocking": 0},
            "comments": connection(lambda **_: [
                {"databaseId": c["id"], "author": self._actor(c["author"]), "body": c["body"],
                 "authorAssociation": c.get("association", "MEMBER"),
                 "reactionGroups": self._reactions(c),
                 "createdAt": _ts(c["at"])} for c in i.comments]),
            "timelineItems": connection(lambda itemTypes=(), **_: [
                self._event(e) for e in i.events
                if not itemTypes or e["type"] in {_TIMELINE[t] for t in itemTypes}]),
            "subIssues": connection(lambda **_: [ref(c) for c in subs]),
            "blockedBy": connection(lambda **_: [ref(b) for b in blockers]),
            "projectItems": connection(lambda **_: [self._item(i)] if i.item_id else []),
            "closedByPullRequestsReferences": connection(lambda includeClosedPrs=False, **_: [
                self._pr(p) for p in s.prs if i.number in p.closes
                and (includeClosedPrs or p.state != "CLOSED")]),
        }  # fmt: skip

    def _reactions(self, c: dict[str, Any]) -> list[dict[str, Any]]:
        """GitHub answers a group for every reaction content, each saying whether the viewer (the
        token's user) reacted with it."""
        mine = {content for who, content in c.get("reactions", ()) if who == self.s.token_login}
        return [{"content": name, "viewerHasReacted": rest in mine}
                for rest, name in _REACTIONS.items()]  # fmt: skip

    def _ref(self, i: FakeIssue) -> dict[str, Any]:
        return {"__typename": "Issue", "number": i.number, "state": i.state.upper(),
                "repository": {"nameWithOwner": self.s.full_name}}  # fmt: skip

    def _event(self, e: dict[str, Any]) -> dict[str, Any]:
        out = {"__typename": e["type"], "createdAt": _ts(e["at"]), "actor": self._actor(e["actor"])}
        if e["type"] in ("ClosedEvent", "ReopenedEvent"):
            out["stateReason"] = (e.get("reason") or "").upper() or None
            closer = e.get("closer")
            out["closer"] = None if closer is None else {
                "__typename": "PullRequest", "number": closer[1],
                "repository": {"nameWithOwner": closer[0]}}  # fmt: skip
        elif e["type"] == "RenamedTitleEvent":
            out["previousTitle"], out["currentTitle"] = e["previous"], e["current"]
        else:
            out["label"] = {"name": e["label"]}
        return out

    def _pr(self, p: FakePR) -> dict[str, Any]:
        return {"number": p.number, "title": p.title, "body": p.body, "headRefName": p.branch,
                "state": p.state, "merged": p.state == "MERGED", "createdAt": _ts(p.created_at),
                "mergedAt": _ts(p.merged_at) if p.merged_at else None,
                "author": self._actor(p.author),
                "repository": {"nameWithOwner": p.repository}}  # fmt: skip


def _ts(at: Any) -> str:
    from tests.github.replay_state import stamp

    return stamp(at)
