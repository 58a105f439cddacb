"""The Board on GitHub: a Projects v2 board read over GraphQL, written over REST.

- **One paginated read per cycle** (D1): :meth:`GitHubBoard.read` pages the board's items with
  everything predicates 1-11 need, plus ``rateLimit`` in the same document; the points every page
  cost are summed into ``BoardPage.cost`` and the last account is kept in ``last_rate_limit`` for
  ``fleet-status --cost``. The halt issue is one of those open issues: zero extra calls.
- **Expensive lists per candidate only** (D1's 143-point field): sub-issues and blockers are read
  behind their summaries, and listed only for open ``Todo`` issues whose summary says there is
  something to list. Other issues carry empty ``blocked_by``/``sub_issues``; predicate 1 already
  stops them.
- **Writes over REST**, comment before close (D12), every comment read back by id before it
  counts as posted — on a closed issue too. Sub-issues and dependencies take database ids.
- **Attribution facts, not verdicts** (D2, D16): closing PRs come back with their state, merge
  time and repository; the runner decides. A reference from another repository cannot close the
  issue and is reported on stderr as a tombstone risk (D6).
- **Guards fail open, the queue fails closed** (D5): an unreadable board raises
  :class:`BoardUnreadable`; :meth:`ci_status` on any error body is UNKNOWN plus a warning.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from fleet.board.base import (
    BoardError,
    BoardPage,
    BoardUnreadable,
    BoardWriteError,
    IdentityMismatch,
    LabelsDropped,
    Skipped,
)
from fleet.board.github import parse as parse
from fleet.board.github import partial as partial
from fleet.board.github import queries as q
from fleet.board.github.features import GITHUB_COM, ServerFeatures, is_github_com, parse_features
from fleet.board.github.features import warnings as feature_warnings
from fleet.board.github.forge import GitHubForge
from fleet.board.github.http import GitHubHTTP, RateLimit, ReadGraphQLErrors, message_of
from fleet.board.github.project import ProjectFields, project_node
from fleet.core.markers import same_login
from fleet.core.model import (
    CIState,
    Comment,
    Issue,
    IssueRef,
    Mention,
    PullRequest,
    StateReason,
    Status,
)

if TYPE_CHECKING:
    from fleet.inventory import BoardConfig

# Items one read may page through before it calls the board unreadable: 200 pages of 50. Bounds a
# cursor that never ends (a server bug) rather than any real board; raise it with the board.
MAX_ITEMS = 10_000
MAX_COMMENT_PAGES = 20  # older-comment pages for one issue() read: 2,000 comments
EDGES_PER_QUERY = q.MAX_PAGE  # ids per nodes(ids:) call

# One queue item as read from a board page: the issue's content, its Status and its Lane.
_Row = tuple[dict[str, Any], str | None, str | None]


def _token_from_file(path: str) -> str:
    """The token from ``path`` (``~`` expanded): the runner's source inside a unit, whose clean
    environment has no token. A file others can read is refused, never used: the credential
    decides who the fleet is (D18). Missing or empty reads as no token."""
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except OSError:
        return ""
    if mode & 0o077:
        raise BoardError(f"{p} is readable by others (mode {mode & 0o777:o}); chmod 600 it")
    try:
        return p.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise BoardError(f"{p}: cannot read the token: {exc.strerror}") from None


class GitHubBoard:
    """The Board Protocol over GitHub (see the module docstring and docs/github.md)."""

    def __init__(
        self,
        *,
        owner: str,
        repo: str,
        project_number: int,
        identity: str,
        token: str,
        api_url: str = "https://api.github.com",
        status_field: str = "Status",
        lane_field: str = "Lane",
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        page_size: int = 50,
        features: ServerFeatures | None = None,
    ) -> None:
        """``features``: what the server offers, when known (None: GitHub.com has everything, any
        other server is asked once, :attr:`features`)."""
        if not 1 <= page_size <= q.MAX_PAGE:
            raise ValueError(f"page_size must be 1-{q.MAX_PAGE} (GitHub's limit), got {page_size}")
        self.owner = owner
        self.repo = repo
        self.full_name = f"{owner}/{repo}"
        self.project_number = project_number
        self.identity = identity
        self.status_field = status_field
        self.lane_field = lane_field
        self.page_size = page_size
        self._http = GitHubHTTP(token=token, api_url=api_url, client=client, sleep=sleep)
        self._fields = ProjectFields(self._http, owner, repo, project_number)
        self._forge = GitHubForge(self._http, owner, repo)
        self._login: str | None = None
        self._api_url = api_url
        if features is None and is_github_com(api_url):
            features = GITHUB_COM
        self._features: ServerFeatures | None = features
        self._http.before_first_write = self.check_identity

    @classmethod
    def from_env(cls, cfg: BoardConfig, env: Mapping[str, str] = os.environ) -> GitHubBoard:
        """Build from the inventory's board section; the token comes from the variable it names."""
        gh = cfg.github
        if cfg.kind != "github" or gh is None:
            raise BoardError(f"board kind is {cfg.kind!r}, not 'github'")
        token = env.get(gh.token_env, "") or _token_from_file(gh.token_file)
        if not token:
            raise BoardError(
                f"environment variable {gh.token_env} is empty or unset and {gh.token_file} holds "
                "no token; one of them must hold the GitHub token (docs/github.md)"
            )
        return cls(
            owner=gh.owner,
            repo=gh.repo,
            project_number=gh.project_number,
            identity=cfg.identity,
            token=token,
            api_url=gh.api_url,
            status_field=gh.status_field,
            lane_field=gh.lane_field,
        )

    def __repr__(self) -> str:
        return (
            f"GitHubBoard({self.full_name!r}, project={self.project_number}, "
            f"identity={self.identity!r})"
        )

    @property
    def last_rate_limit(self) -> RateLimit | None:
        """GraphQL's account of the last call: cost, points remaining, reset time."""
        return self._http.last_rate_limit

    # -- who the token is (D18) ------------------------------------------------------------------

    def whoami(self) -> str:
        """The token's login (``viewer { login }``), read once per board instance."""
        if self._login is None:
            data = self._http.graphql(q.VIEWER, {})
            viewer = parse.obj(data.get("viewer"), "viewer")
            self._login = parse.text(viewer.get("login"), "viewer.login")
        return self._login

    def check_identity(self) -> None:
        """Refuse to write unless the token's login is ``identity`` (compared as GitHub compares
        logins: without case). Runs before the first write of every board instance, so once per
        command; a command may call it up front to refuse before doing anything else."""
        login = self.whoami()
        if not same_login(login, self.identity):
            raise IdentityMismatch(
                f"the token belongs to {login!r} but the inventory's identity is "
                f"{self.identity!r}: set board.identity to {login!r}, or use {self.identity!r}'s "
                "token (docs/github.md)"
            )

    @property
    def features(self) -> ServerFeatures:
        """What the server's schema offers: GitHub.com has it all; any other server is asked once
        (one introspection per board instance) and each missing feature is named on stderr."""
        if self._features is None:
            self._features = parse_features(self._http.graphql(q.FEATURES, {}))
            for line in feature_warnings(self._features, self._api_url):
                print(f"fleet: warning: {line}", file=sys.stderr)
        return self._features

    def _document(self, document: str) -> str:
        f = self.features
        return q.for_server(document, dependencies=f.dependencies, items_filter=f.items_filter)

    def field_options(self, name: str) -> tuple[str, tuple[str, ...]] | None:
        """The board field ``name``'s type and single-select options, or None when the board has
        no such field (``invoke doctor``: name the missing option before a write needs it)."""
        found = self._fields.project().fields.get(name)
        if found is None:
            return None
        return found.data_type, tuple(found.options)

    # -- the queue -------------------------------------------------------------------------------

    def read(self) -> BoardPage:
        items, unseen, cost = self._queue_items()
        wanted = [c["id"] for c, s, _ in items if s == Status.TODO.value and parse.has_edges(c)]
        edges, edge_cost, edge_unseen = self._edges(wanted)
        issues = []
        for c, s, lane in sorted(items, key=lambda t: t[0].get("number", 0)):
            if c["id"] in edge_unseen:
                continue
            older, unreadable, more = self._page_older(c)
            cost += more
            issue = parse.issue(
                c,
                full_name=self.full_name,
                status=s,
                lane=lane,
                blocked_by=edges[c["id"]][0] if c["id"] in edges else (),
                sub_issues=edges[c["id"]][1] if c["id"] in edges else (),
                older_comments=older,
            )
            issues.append(replace(issue, unreadable=unreadable) if unreadable else issue)
        return BoardPage(
            issues=tuple(issues),
            read_at=datetime.now(UTC),
            cost=cost + edge_cost,
            cost_unit="points",
            skipped=tuple(unseen) + tuple(edge_unseen.values()),
        )

    def _queue_items(self) -> tuple[list[_Row], list[Skipped], int]:
        """Every page of the board's items: the queue's rows (issue, Status, Lane), the items a
        partial answer left unreadable, and the points spent."""
        items: list[_Row] = []
        unseen: list[Skipped] = []
        cost, after = 0, None
        for page_no in range(-(-MAX_ITEMS // self.page_size)):
            variables = {
                "owner": self.owner,
                "project": self.project_number,
                "first": self.page_size,
                "after": after,
                "statusField": self.status_field,
                "laneField": self.lane_field,
            }
            if self.features.items_filter:
                variables["query"] = q.ITEMS_FILTER
            data, errors = self._http.graphql_partial(self._document(q.BOARD_PAGE), variables)
            cost += self._cost()
            bad, whole = partial.split(errors, partial.BOARD_ITEMS)
            if whole:  # about the board itself: no eligibility decision can be made (D5)
                raise ReadGraphQLErrors(f"board read: {message_of({'errors': whole})}", whole)
            conn = parse.obj(
                project_node(data, self.owner, self.project_number).get("items"), "projectV2.items"
            )
            for index, item in enumerate(parse.seq(conn.get("nodes"), "projectV2.items.nodes")):
                if index in bad:
                    where = item.get("id") if isinstance(item, dict) else None
                    name = where if isinstance(where, str) else f"page {page_no + 1} item {index}"
                    unseen.append(partial.skipped(name, bad[index]))
                    continue
                if isinstance(item, dict) and (row := self._queue_row(item)) is not None:
                    items.append(row)
            page = parse.obj(conn.get("pageInfo"), "items.pageInfo")
            if not page.get("hasNextPage"):
                break
            after = parse.text(page.get("endCursor"), "items.pageInfo.endCursor")
        else:
            raise BoardUnreadable(f"board has more than {MAX_ITEMS} items; refusing a partial read")
        return items, unseen, cost

    def _page_older(self, node: dict[str, Any]) -> tuple[list[Any], str | None, int]:
        """The comments before the page's last ``MAX_PAGE``: markers live there once a hundred
        comments (a "+1" flood from anyone) follow them, and an issue read without them says no
        attempts and no latch. Past ``MAX_COMMENT_PAGES`` the issue alone is unreadable (held by
        name, never read as empty); the rest of the board is still read."""
        spent: list[int] = []
        try:
            older = self._older_comments(node, spent)
        except BoardUnreadable as exc:
            return [], f"its comments could not all be read: {exc}", sum(spent)
        return older, None, sum(spent)

    def _queue_row(self, item: dict[str, Any]) -> _Row | None:
        """The item's issue, Status and Lane when it is part of the queue, else None."""
        content = item.get("content")
        if item.get("isArchived") or not isinstance(content, dict):
            return None
        if content.get("__typename") != "Issue" or content.get("state") != "OPEN":
            return None  # draft issues, pull requests, closed issues are not the queue
        if parse.repository_of(content, self.full_name, "item") != "":
            return None  # another repository's issue on a shared board is not ours
        return content, parse.field_text(item.get("status")), parse.field_text(item.get("lane"))

    def _cost(self) -> int:
        return self.last_rate_limit.cost if self.last_rate_limit else 0

    def _edges(self, ids: list[str]) -> tuple[dict[str, tuple[Any, Any]], int, dict[str, Skipped]]:
        """Blockers and sub-issues of the candidates, ``EDGES_PER_QUERY`` ids a call. A candidate
        whose lists came back partly unreadable (a blocker in a repository the token cannot see)
        is skipped and named: an unseen blocker may be open (predicate 4)."""
        out: dict[str, tuple[Any, Any]] = {}
        unseen: dict[str, Skipped] = {}
        cost = 0
        for start in range(0, len(ids), EDGES_PER_QUERY):
            chunk = ids[start : start + EDGES_PER_QUERY]
            data, errors = self._http.graphql_partial(self._document(q.EDGES), {"ids": chunk})
            cost += self._cost()
            bad, whole = partial.split(errors, partial.EDGE_NODES)
            if whole:
                raise ReadGraphQLErrors(f"candidate lists: {message_of({'errors': whole})}", whole)
            for index, node in enumerate(parse.seq(data.get("nodes"), "nodes")):
                if index in bad and index < len(chunk):
                    unseen[chunk[index]] = partial.skipped(chunk[index], bad[index])
                elif isinstance(node, dict) and node.get("__typename") == "Issue":
                    out[node["id"]] = (
                        self._blockers(node),
                        parse.refs(node.get("subIssues"), self.full_name, "subIssues"),
                    )
        return out, cost, unseen

    def issue(self, number: int) -> Issue | None:
        data = self._http.graphql(
            self._document(q.ISSUE),
            {
                "owner": self.owner,
                "name": self.repo,
                "number": number,
                "statusField": self.status_field,
                "laneField": self.lane_field,
            },
            not_found_ok=True,
        )
        node = parse.obj(data.get("repository"), "repository").get("issue")
        if node is None:
            return None  # no such issue: a fact, not a failure (D20)
        ours = [
            i
            for i in parse.nodes(node.get("projectItems"), "projectItems")
            if isinstance(i.get("project"), dict)
            and i["project"].get("number") == self.project_number
        ]
        item = ours[0] if ours else {}
        return parse.issue(
            node,
            full_name=self.full_name,
            status=parse.field_text(item.get("status")),
            lane=parse.field_text(item.get("lane")),
            blocked_by=self._blockers(node),
            sub_issues=parse.refs(node.get("subIssues"), self.full_name, "subIssues"),
            older_comments=self._older_comments(node),
        )

    def _blockers(self, node: dict[str, Any]) -> tuple[IssueRef, ...]:
        """The issue's blockers; none on a server without issue dependencies (named once)."""
        if not self.features.dependencies:
            return ()
        return parse.refs(node.get("blockedBy"), self.full_name, "blockedBy")

    def _older_comments(self, node: dict[str, Any], spent: list[int] | None = None) -> list[Any]:
        older: list[Any] = []
        page = parse.obj(parse.obj(node.get("comments"), "comments").get("pageInfo"), "pageInfo")
        for _ in range(MAX_COMMENT_PAGES):
            if not page.get("hasPreviousPage"):
                return older
            data = self._http.graphql(
                q.OLDER_COMMENTS, {"id": node["id"], "before": page.get("startCursor")}
            )
            if spent is not None:
                spent.append(self._cost())
            conn = parse.obj(parse.obj(data.get("node"), "node").get("comments"), "comments")
            older = parse.nodes(conn, "comments") + older
            page = parse.obj(conn.get("pageInfo"), "pageInfo")
        raise BoardUnreadable(f"issue has more than {MAX_COMMENT_PAGES * q.MAX_PAGE} comments")

    def create_issue(
        self,
        title: str,
        body: str = "",
        *,
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
        lane: str | None = None,
        status: str | None = "Todo",
        author: str | None = None,
    ) -> int:
        """File the issue with its labels in the same POST (the fixture label from birth,
        predicate 9), then put it on the board."""
        self._as_identity(author)
        made = parse.obj(
            self._rest(
                "POST",
                "/issues",
                json={
                    "title": title,
                    "body": body,
                    "labels": list(labels),
                    "assignees": list(assignees),
                },
                ok=(201,),
            ),
            "created issue",
        )
        number = parse.integer(made.get("number"), "created issue.number")
        self._require_kept(number, made, labels, assignees)
        try:
            item = self._fields.add_item(parse.text(made.get("node_id"), "issue.node_id"))
            if status is not None:
                self._fields.set(item, self.status_field, status)
            if lane is not None:
                self._fields.set(item, self.lane_field, lane)
        except BoardError as exc:
            raise BoardWriteError(
                f"issue #{number} was filed but is not on the board: {exc}"
            ) from exc
        return number

    def _require_kept(
        self,
        number: int,
        made: dict[str, Any],
        labels: Sequence[str],
        assignees: Sequence[str],
    ) -> None:
        """GitHub drops the labels and assignees of a new issue, silently, when the token's user
        lacks push access (REST "Create an issue"). Check the answer; an issue missing any of them
        is closed at once — before it reaches the board — and the command fails."""
        got_labels = {parse.text(lb.get("name"), "label.name").lower()
                      for lb in parse.seq(made.get("labels"), "created issue.labels")
                      if isinstance(lb, dict)}  # fmt: skip
        got_people = {parse.login(a).lower()
                      for a in parse.seq(made.get("assignees") or [], "created issue.assignees")}  # fmt: skip
        missing = tuple(
            [f"label {name!r}" for name in labels if name.lower() not in got_labels]
            + [f"assignee {who!r}" for who in assignees if who.lower() not in got_people]
        )
        if not missing:
            return
        try:
            self.close(number, StateReason.NOT_PLANNED)
            fate = "closed it at once (not planned)"
        except BoardError as exc:
            fate = f"and could NOT close it ({exc}): close #{number} by hand"
        raise LabelsDropped(
            f"#{number} was filed without {', '.join(missing)} — GitHub drops them when the "
            f"token's user has no push access to {self.full_name}; {fate} (docs/github.md)",
            number,
            missing,
        )

    def comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        """Post, then read the comment back by id: closing an already-closed issue once dropped a
        comment silently (D12), so a comment counts as posted only when it can be read."""
        self._as_identity(author)
        posted = parse.obj(
            self._rest("POST", f"/issues/{number}/comments", json={"body": body}, ok=(201,)),
            "posted comment",
        )
        cid = parse.integer(posted.get("id"), "posted comment.id")
        stored = self._http.rest(
            "GET", f"/repos/{self.full_name}/issues/comments/{cid}", write=True, ok=(200,)
        )
        if not isinstance(stored, dict) or stored.get("body") != body:
            raise BoardWriteError(f"comment {cid} on #{number} did not read back as posted")
        return Comment(
            id=cid,
            author=parse.login(stored.get("user")),
            body=body,
            created_at=parse.when(stored.get("created_at"), "comment.created_at"),
            association=parse.association(
                stored.get("author_association"), "comment.author_association"
            ),
        )

    def close(self, number: int, reason: StateReason = StateReason.COMPLETED) -> None:
        self._patch_state(number, {"state": "closed", "state_reason": reason.value}, "closed")

    def reopen(self, number: int, *, author: str | None = None) -> None:
        self._as_identity(author)
        self._patch_state(number, {"state": "open"}, "open")

    def _patch_state(self, number: int, body: dict[str, str], want: str) -> None:
        got = self._rest("PATCH", f"/issues/{number}", json=body, ok=(200,))
        if not isinstance(got, dict) or got.get("state") != want:
            raise BoardWriteError(f"#{number} is not {want} after the update")

    def add_labels(self, number: int, labels: Sequence[str]) -> None:
        if labels:
            self._rest("POST", f"/issues/{number}/labels", json={"labels": list(labels)})

    def remove_label(self, number: int, label: str) -> None:
        # 404: the label is not on the issue, which is what removing it asks for.
        self._rest("DELETE", f"/issues/{number}/labels/{quote(label, safe='')}", missing_ok=True)

    def assign(self, number: int, assignees: Sequence[str]) -> None:
        if assignees:
            self._rest("POST", f"/issues/{number}/assignees", json={"assignees": list(assignees)})

    def set_status(self, number: int, status: str) -> None:
        self._fields.set(self._fields.item_of(number), self.status_field, status)

    def set_lane(self, number: int, lane: str | None) -> None:
        self._fields.set(self._fields.item_of(number), self.lane_field, lane)

    def set_parent(self, child: int, parent: int | None) -> None:
        """Sub-issues take the child's database id, not its number."""
        child_id = self._database_id(child)
        if parent is None:
            current = self._rest("GET", f"/issues/{child}/parent", missing_ok=True, write=False)
            if isinstance(current, dict) and isinstance(current.get("number"), int):
                # The parent may live in another repository: detach where it lives (its own API
                # URL), never from a same-numbered issue of ours.
                url = current.get("url")
                where = url if isinstance(url, str) and self._http.owns(url) else None
                if where is None:
                    raise BoardWriteError(f"#{child}'s parent has no API URL on this host: {url!r}")
                self._http.rest("DELETE", f"{where}/sub_issue", write=True,
                                json={"sub_issue_id": child_id})  # fmt: skip
            return
        self._rest(
            "POST",
            f"/issues/{parent}/sub_issues",
            json={"sub_issue_id": child_id, "replace_parent": True},
            ok=(201,),
        )

    def add_blocker(self, number: int, blocked_by: int) -> None:
        """Dependencies take the blocker's database id, not its number (D9)."""
        self._rest(
            "POST",
            f"/issues/{number}/dependencies/blocked_by",
            json={"issue_id": self._database_id(blocked_by)},
            ok=(201,),
        )

    def remove_blocker(self, number: int, blocked_by: int) -> None:
        blocker = self._database_id(blocked_by)
        self._rest("DELETE", f"/issues/{number}/dependencies/blocked_by/{blocker}", missing_ok=True)

    # -- the forge and mentions (github_forge.py) -------------------------------------------

    def pull_requests_closing(self, number: int) -> tuple[PullRequest, ...]:
        return self._forge.pull_requests_closing(number)

    def ci_status(self) -> CIState:
        return self._forge.ci_status()

    def unread_mentions(self, number: int) -> tuple[Mention, ...]:
        return self._forge.unread_mentions(number, self.identity)

    def mark_mentions_read(self, ids: Sequence[int]) -> None:
        self._forge.mark_mentions_read(ids)

    # -- helpers ---------------------------------------------------------------------------------

    def _as_identity(self, author: str | None) -> None:
        """GitHub writes as the token's user (D18). Writing as ``self.identity`` while a caller
        asked for someone else would file that someone's words under the fleet's name — a
        human's text read as the fleet's marker — so it is refused, not ignored (D20)."""
        if author is not None and not same_login(author, self.identity):
            raise BoardWriteError(
                f"cannot write as {author!r}: GitHub writes as the token's user {self.identity!r}"
            )

    def _rest(self, method: str, path: str, *, write: bool = True, **kw: Any) -> Any:
        return self._http.rest(method, f"/repos/{self.full_name}{path}", write=write, **kw)

    def _database_id(self, number: int) -> int:
        got = parse.obj(self._rest("GET", f"/issues/{number}", write=True, ok=(200,)), "issue")
        return parse.integer(got.get("id"), f"issue #{number}.id")
