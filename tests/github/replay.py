"""A small stateful GitHub behind ``httpx.MockTransport`` — the one fake the GitHub tests allow.

It replays GitHub's documented response shapes: REST bodies are the recorded fixtures in
``tests/fixtures/github`` with this replayer's state written into them, and GraphQL documents are
*executed against GitHub's published schema* (graphql-core) over resolvers reading the same state,
so an answer can only carry fields GitHub has. Every document is validated first and every answer
is run through :func:`tests.github.shape.check`; either failing raises in the test, not later.

Faults are scripted: :meth:`Replayer.enqueue` serves a recorded fixture (a secondary rate limit, a
404 body, a GraphQL error) to the next matching request instead of the state's answer.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from graphql import DocumentNode, execute_sync, parse, validate

from fleet.board.github.queries import query_cost
from tests.github import replay_graphql, shape
from tests.github.replay_state import FIXTURES, FakeIssue, FakePR, Thread, fixture, stamp

TOKEN = "ghp_replayer0123456789abcdefTOKEN"  # what the tests hand the board; never logged
API = "https://api.github.test"


class Replayer:
    """GitHub for one repository and one Projects v2 board, in memory."""

    def __init__(self, *, owner: str = "octo-org", repo: str = "widgets", login: str = "fleet-bot",
                 lane_kind: str = "TEXT", start: datetime | None = None,
                 schema_path: Path = shape.SCHEMA_PATH) -> None:  # fmt: skip
        self.owner, self.repo, self.login = owner, repo, login
        # GitHub.com's schema, or an older one: a GitHub Enterprise Server without the newer fields
        self.schema_path = schema_path
        self.token_login = login  # who the token is: viewer { login } (may differ from login)
        # Without push access GitHub files the issue but drops its labels and assignees, silently
        # (REST "Create an issue": "Only users with push access can set labels for new issues.
        # Labels are silently dropped otherwise"; the same for assignees).
        self.push_access = True
        self.full_name = f"{owner}/{repo}"
        self.project_number, self.project_id = 1, "PVT_kwDOREPLAY"
        self.lane_kind = lane_kind  # TEXT or SINGLE_SELECT (docs/github.md allows both)
        self.lane_options = ["cpu", "gpu"]
        self.status_options = ["Todo", "In progress", "Done"]  # a new project's Status field
        self.issues: dict[int, FakeIssue] = {}
        self.prs: list[FakePR] = []
        self.threads: list[Thread] = []
        self.ci: tuple[str, list[str]] = ("success", ["success"])  # combined, check conclusions
        self.remaining = 5000
        self.requests: list[tuple[str, str, Any]] = []  # method, path, JSON body
        self.answers: list[tuple[str, Any]] = []  # every GraphQL (document, answer) served
        self._faults: list[tuple[str, str, dict[str, Any]]] = []
        self._now = start or datetime.now(UTC) - timedelta(days=1)
        self._ids = itertools.count(1)

    # -- scripting -------------------------------------------------------------------------------

    def enqueue(self, method: str, path_pattern: str, fixture_name: str, times: int = 1) -> None:
        """Serve ``fixture_name`` to the next ``times`` requests matching method and regex."""
        for _ in range(times):
            self._faults.append((method, path_pattern, fixture(fixture_name)))

    def tick(self) -> datetime:
        """GitHub's clock: whole seconds, one per write, so every write has its own second."""
        self._now += timedelta(seconds=1)
        return self._now

    def add_issue(self, title: str, *, author: str | None = None, **kw: Any) -> FakeIssue:
        """An issue; ``association=`` is its author's authorAssociation (default MEMBER: the fleet
        bot and the humans these tests write as are members of the organisation)."""
        number = len(self.issues) + 1
        issue = FakeIssue(number, 70_000 + number * 7, title, kw.pop("body", ""),
                          author or self.login, self.tick(), **kw)  # fmt: skip
        issue.updated_at = issue.created_at
        self.issues[number] = issue
        return issue

    def human_comment(self, number: int, author: str, body: str,
                      association: str = "MEMBER") -> int:  # fmt: skip
        """A comment by someone else, with their authorAssociation (GitHub's CommentAuthorAssociation:
        OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, FIRST_TIME_CONTRIBUTOR, FIRST_TIMER, MANNEQUIN,
        NONE). A mention of our login subscribes us to the issue's ONE notification thread; any
        later comment by someone else makes that thread unread again (GitHub's thread semantics)."""
        cid = 5_000_000 + next(self._ids)
        self.issues[number].comments.append({"id": cid, "author": author, "body": body,
                                             "at": self.tick(), "association": association,
                                             "reactions": []})  # fmt: skip
        thread = next((t for t in self.threads if t.issue == number), None)
        if thread is not None:
            thread.unread = True
        elif re.search(rf"(?<![\w@.])@{re.escape(self.login)}(?![\w/-])", body, re.IGNORECASE):
            self.threads.append(Thread(9_000 + next(self._ids), number))
        return cid

    def open_pr(self, body: str, *, repository: str | None = None, created_at: datetime | None = None,
                closes: list[int] | None = None) -> FakePR:  # fmt: skip
        from fleet.core.closing import closing_refs

        repository = repository or self.full_name
        if closes is None:  # GitHub links what the body closes in *this* repository
            closes = [r.number for r in closing_refs(body)
                      if (r.repository or repository).lower() == self.full_name.lower()]  # fmt: skip
        pr = FakePR(len(self.prs) + 100, f"PR for {closes}", body, f"fleet/{len(self.prs)}",
                    created_at or self.tick(), repository, closes)  # fmt: skip
        self.prs.append(pr)
        return pr

    def merge(self, pr: FakePR) -> None:
        """GitHub closes every issue the PR is linked to close — one of another repository too,
        when its author may (a closing keyword with ``owner/repo#N``) — and the ClosedEvent names
        the PR as its closer."""
        pr.state, pr.merged_at = "MERGED", self.tick()
        for n in pr.closes:
            self._set_state(self.issues[n], "closed", "completed", actor=pr.author,
                            closer=(pr.repository, pr.number))  # fmt: skip

    # -- the transport ---------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=self.transport(), timeout=5.0)

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append((request.method, path, body))
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return self._recorded(fixture("rest_bad_credentials"))
        for i, (method, pattern, recorded) in enumerate(self._faults):
            if method == request.method and re.fullmatch(pattern, path):
                del self._faults[i]
                return self._recorded(recorded)
        if path == "/graphql" and request.method == "POST":
            return self._graphql(body)
        return self._rest(request, path, body)

    def _recorded(self, recorded: dict[str, Any]) -> httpx.Response:
        if "document" in recorded:  # a recorded GraphQL answer
            answer = recorded["response"]
            problems = shape.check(_documents()[recorded["document"]], answer)
            assert not problems, problems
            self.answers.append((recorded["document"], answer))
            return httpx.Response(recorded.get("status", 200), headers=recorded.get("headers", {}),
                                  json=answer)  # fmt: skip
        return httpx.Response(recorded["status"], headers=recorded["headers"],
                              json=recorded["body"])  # fmt: skip

    def _graphql(self, payload: dict[str, Any]) -> httpx.Response:
        document, variables = payload["query"], payload.get("variables") or {}
        cost = query_cost(document, variables)
        self.remaining -= cost
        root = replay_graphql.Root(self, cost)
        result = execute_sync(shape.schema(self.schema_path),
                              _validated(document, self.schema_path), root_value=root,
                              variable_values=variables)  # fmt: skip
        answer: dict[str, Any] = {}
        if result.errors:
            answer["errors"] = [replay_graphql.github_error(e) for e in result.errors]
            unexpected = [e for e in answer["errors"] if "type" not in e]
            assert not unexpected, f"replayer failed to answer: {unexpected}"
        answer["data"] = result.data
        problems = shape.check(document, answer)
        assert not problems, problems
        self.answers.append((document, answer))
        headers = {"x-ratelimit-remaining": str(self.remaining), "x-ratelimit-resource": "graphql"}
        return httpx.Response(200, headers=headers, json=answer)

    # -- REST ------------------------------------------------------------------------------------

    def _rest(self, request: httpx.Request, path: str, body: Any) -> httpx.Response:
        m = request.method
        base = f"/repos/{self.full_name}"
        routes: list[tuple[str, str, Callable[..., httpx.Response]]] = [
            ("POST", rf"{base}/issues", self._create),
            ("GET", rf"{base}/issues/(\d+)", self._get_issue),
            ("PATCH", rf"{base}/issues/(\d+)", self._patch_issue),
            ("POST", rf"{base}/issues/(\d+)/comments", self._post_comment),
            ("GET", rf"{base}/issues/comments/(\d+)", self._get_comment),
            ("POST", rf"{base}/issues/(\d+)/labels", self._add_labels),
            ("DELETE", rf"{base}/issues/(\d+)/labels/([^/]+)", self._remove_label),
            ("POST", rf"{base}/issues/(\d+)/assignees", self._assign),
            ("POST", rf"{base}/issues/(\d+)/sub_issues", self._add_sub),
            ("DELETE", rf"{base}/issues/(\d+)/sub_issue", self._remove_sub),
            ("GET", rf"{base}/issues/(\d+)/parent", self._get_parent),
            ("POST", rf"{base}/issues/(\d+)/dependencies/blocked_by", self._add_blocker),
            ("DELETE", rf"{base}/issues/(\d+)/dependencies/blocked_by/(\d+)", self._remove_blocker),
            ("GET", rf"{base}", self._repository),
            ("GET", rf"{base}/commits/([^/]+)/status", self._status),
            ("GET", rf"{base}/commits/([^/]+)/check-runs", self._check_runs),
            ("GET", r"/notifications", self._notifications),
            ("PATCH", r"/notifications/threads/(\d+)", self._read_thread),
            ("POST", rf"{base}/issues/comments/(\d+)/reactions", self._react),
        ]
        for method, pattern, handler in routes:
            hit = re.fullmatch(pattern, path)
            if method == m and hit:
                args = [int(g) if g.isdigit() else g for g in hit.groups()]
                try:
                    return handler(*args, body=body, params=request.url.params)
                except (LookupError, ValueError):  # no such issue, comment, label or edge
                    break
        return self._recorded(fixture("rest_not_found"))

    def _send(self, status: int, body: Any) -> httpx.Response:
        return httpx.Response(status, json=body, headers={"x-ratelimit-remaining": "4999"})

    def issue_json(self, issue: FakeIssue) -> dict[str, Any]:
        out = copy.deepcopy(fixture("rest_issue")["body"])
        url = f"{API}/repos/{self.full_name}/issues/{issue.number}"
        label = out["labels"][0]
        subs = [i for i in self.issues.values() if i.parent == issue.number]
        out.update({
            "id": issue.db_id, "node_id": issue.node_id, "number": issue.number, "url": url,
            "html_url": f"https://github.test/{self.full_name}/issues/{issue.number}",
            "title": issue.title, "body": issue.body, "state": issue.state,
            "state_reason": issue.state_reason, "user": self._user(issue.author),
            "author_association": issue.association,
            "labels": [{**label, "name": name, "default": False} for name in issue.labels],
            "assignee": self._user(issue.assignees[0]) if issue.assignees else None,
            "assignees": [self._user(a) for a in issue.assignees],
            "comments": len(issue.comments), "created_at": stamp(issue.created_at),
            "updated_at": stamp(issue.updated_at or issue.created_at),
            "closed_at": stamp(issue.closed_at) if issue.closed_at else None,
            "sub_issues_summary": {"total": len(subs), "completed": sum(s.state == "closed"
                                   for s in subs), "percent_completed": 0},
        })  # fmt: skip
        return out

    def comment_json(self, number: int, c: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(fixture("rest_issue_comment")["body"])
        out.update({"id": c["id"], "body": c["body"], "user": self._user(c["author"]),
                    "author_association": c.get("association", "MEMBER"),
                    "created_at": stamp(c["at"]), "updated_at": stamp(c["at"]),
                    "url": f"{API}/repos/{self.full_name}/issues/comments/{c['id']}",
                    "issue_url": f"{API}/repos/{self.full_name}/issues/{number}"})  # fmt: skip
        return out

    def _user(self, login: str) -> dict[str, Any]:
        out = copy.deepcopy(fixture("rest_issue")["body"]["user"])
        out.update({"login": login, "url": f"{API}/users/{login}"})
        return out

    def _create(self, *, body: Any, **_: Any) -> httpx.Response:
        kept = self.push_access
        issue = self.add_issue(body["title"], body=body.get("body") or "",
                               labels=list(body.get("labels", [])) if kept else [],
                               assignees=list(body.get("assignees", [])) if kept else [])  # fmt: skip
        return self._send(201, self.issue_json(issue))

    def _get_issue(self, n: int, **_: Any) -> httpx.Response:
        return self._send(200, self.issue_json(self.issues[n]))

    def _set_state(self, issue: FakeIssue, state: str, reason: str | None, actor: str,
                   closer: tuple[str, int] | None = None) -> None:  # fmt: skip
        if issue.state == state:
            return
        at = self.tick()
        issue.state, issue.updated_at = state, at
        issue.state_reason = reason if state == "closed" else "reopened"
        issue.closed_at = at if state == "closed" else None
        kind = "ClosedEvent" if state == "closed" else "ReopenedEvent"
        issue.events.append({"type": kind, "at": at, "actor": actor, "reason": issue.state_reason,
                             "closer": closer})  # fmt: skip

    def _patch_issue(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        issue = self.issues[n]
        if "state" in body:
            self._set_state(issue, body["state"], body.get("state_reason", "completed"), self.login)
        return self._send(200, self.issue_json(issue))

    def _post_comment(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        c = {"id": 4_000_000 + next(self._ids), "author": self.token_login, "body": body["body"],
             "at": self.tick(), "association": "MEMBER", "reactions": []}  # fmt: skip
        self.issues[n].comments.append(c)
        return self._send(201, self.comment_json(n, c))

    def _get_comment(self, cid: int, **_: Any) -> httpx.Response:
        for issue in self.issues.values():
            for c in issue.comments:
                if c["id"] == cid:
                    return self._send(200, self.comment_json(issue.number, c))
        raise KeyError(cid)

    def _labels(self, issue: FakeIssue) -> list[dict[str, Any]]:
        label = fixture("rest_labels")["body"][0]
        return [{**label, "name": name, "default": False} for name in issue.labels]

    def _add_labels(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        issue = self.issues[n]
        for name in body["labels"]:
            if name not in issue.labels:
                issue.labels.append(name)
                issue.events.append({"type": "LabeledEvent", "at": self.tick(),
                                     "actor": self.login, "label": name})  # fmt: skip
        return self._send(200, self._labels(issue))

    def _remove_label(self, n: int, name: str, **_: Any) -> httpx.Response:
        issue = self.issues[n]
        issue.labels.remove(name)  # ValueError: not on the issue -> 404, as GitHub answers
        issue.events.append({"type": "UnlabeledEvent", "at": self.tick(), "actor": self.login,
                             "label": name})  # fmt: skip
        return self._send(200, self._labels(issue))

    def _assign(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        issue = self.issues[n]
        issue.assignees += [a for a in body["assignees"] if a not in issue.assignees]
        return self._send(201, self.issue_json(issue))

    def by_db_id(self, db_id: Any) -> FakeIssue:
        """Sub-issues and dependencies take database ids; an issue number here is a 422."""
        for issue in self.issues.values():
            if isinstance(db_id, int) and not isinstance(db_id, bool) and issue.db_id == db_id:
                return issue
        raise LookupError(db_id)

    def _add_sub(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        try:
            child = self.by_db_id(body.get("sub_issue_id"))
        except LookupError:
            return self._recorded(fixture("rest_validation_failed"))
        if child.parent is not None and not body.get("replace_parent"):
            return self._recorded(fixture("rest_validation_failed"))
        child.parent = self.issues[n].number
        return self._send(201, self.issue_json(child))

    def _remove_sub(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        child = self.by_db_id(body.get("sub_issue_id"))
        assert child.parent == n, "removing a sub-issue from a parent it does not have"
        child.parent = None
        return self._send(200, self.issue_json(child))

    def _get_parent(self, n: int, **_: Any) -> httpx.Response:
        parent = self.issues[n].parent
        if parent is None:
            return self._recorded(fixture("rest_not_found"))
        return self._send(200, self.issue_json(self.issues[parent]))

    def _add_blocker(self, n: int, *, body: Any, **_: Any) -> httpx.Response:
        try:
            blocker = self.by_db_id(body.get("issue_id"))
        except LookupError:
            return self._recorded(fixture("rest_validation_failed"))
        self.issues[n].blocked_by.append(blocker.number)
        return self._send(201, self.issue_json(blocker))

    def _remove_blocker(self, n: int, db_id: int, **_: Any) -> httpx.Response:
        blocker = self.by_db_id(db_id)
        self.issues[n].blocked_by.remove(blocker.number)
        return self._send(200, self.issue_json(blocker))

    def _repository(self, **_: Any) -> httpx.Response:
        out = copy.deepcopy(fixture("rest_repository")["body"])
        out.update({"name": self.repo, "full_name": self.full_name, "default_branch": "main"})
        return self._send(200, out)

    def _status(self, ref: str, **_: Any) -> httpx.Response:
        out = copy.deepcopy(fixture("rest_combined_status")["body"])
        state = self.ci[0]
        out["statuses"] = [{**out["statuses"][0], "state": state}] if state != "none" else []
        out["state"], out["total_count"] = ("pending", 0) if state == "none" else (state, 1)
        return self._send(200, out)

    def _check_runs(self, ref: str, *, params: httpx.QueryParams, **_: Any) -> httpx.Response:
        """Paged as GitHub pages them: ``per_page`` 30 unless asked (at most 100), ``page`` from 1,
        ``total_count`` over all pages (rest_check_runs_page1.json)."""
        out = copy.deepcopy(fixture("rest_check_runs")["body"])
        run = out["check_runs"][0]
        every = [
            {**run, "id": i, "status": "in_progress" if c == "pending" else "completed",
             "conclusion": None if c == "pending" else c}
            for i, c in enumerate(self.ci[1])
        ]  # fmt: skip
        size = min(int(params.get("per_page", "30")), 100)
        page = int(params.get("page", "1"))
        out["check_runs"] = every[(page - 1) * size : page * size]
        out["total_count"] = len(every)
        return self._send(200, out)

    def _notifications(self, *, params: httpx.QueryParams, **_: Any) -> httpx.Response:
        assert params.get("participating") == "true"
        template = fixture("rest_notifications")["body"][0]
        out = []
        for t in self.threads:
            if not t.unread and params.get("all") != "true":
                continue
            issue = self.issues[t.issue]
            thread = copy.deepcopy(template)
            thread["repository"].update({"name": self.repo, "full_name": self.full_name})
            thread.update({"id": str(t.id), "unread": t.unread, "reason": t.reason,
                           "updated_at": stamp(self._now),
                           "url": f"{API}/notifications/threads/{t.id}"})  # fmt: skip
            thread["subject"] = {
                "title": issue.title, "type": "Issue",
                "url": f"{API}/repos/{self.full_name}/issues/{issue.number}",
                "latest_comment_url":
                    f"{API}/repos/{self.full_name}/issues/comments/{issue.comments[-1]['id']}",
            }  # fmt: skip
            out.append(thread)
        return self._send(200, out)

    def _react(self, cid: int, *, body: Any, **_: Any) -> httpx.Response:
        """201 for a new reaction, 200 when the user already left that one (REST "Reactions")."""
        (c,) = [c for i in self.issues.values() for c in i.comments if c["id"] == cid]
        mine = (self.token_login, body["content"])
        fresh = mine not in c.setdefault("reactions", [])
        if fresh:
            c["reactions"].append(mine)
        out = copy.deepcopy(fixture("rest_reaction")["body"])
        out.update({"content": body["content"], "user": self._user(self.token_login)})
        return self._send(201 if fresh else 200, out)

    def _read_thread(self, tid: int, **_: Any) -> httpx.Response:
        (thread,) = [t for t in self.threads if t.id == tid]
        thread.unread = False
        return httpx.Response(205)


@functools.cache
def _validated(document: str, schema_path: Path = shape.SCHEMA_PATH) -> DocumentNode:
    """Parse and validate once per distinct document: a field GitHub lacks fails the test here."""
    parsed = parse(document)
    errors = validate(shape.schema(schema_path), parsed)
    assert not errors, f"document invalid against GitHub's schema: {errors}"
    return parsed


def _documents() -> dict[str, str]:
    from fleet.board.github.queries import DOCUMENTS

    return DOCUMENTS


__all__ = ["API", "FIXTURES", "TOKEN", "Replayer", "fixture", "stamp"]
