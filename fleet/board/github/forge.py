"""The forge half of the GitHub board: closing pull requests (D2, D16), CI on main (check 7), and
mentions (D19, read from the issue's comments: ``fleet/core/mentions.py``). Split from ``github.py`` so each module reads in one sitting.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from fleet.board.base import BoardError, BoardUnreadable
from fleet.board.github import parse as parse
from fleet.board.github import queries as q
from fleet.board.github.http import GitHubHTTP
from fleet.core.mentions import select as select_mentions
from fleet.core.model import CIState, Mention, PullRequest

# Check runs of main read per call: 10 pages of 100 (GitHub's maximum per_page; its default is 30,
# so an unpaged read missed the 31st run). Past it CI is UNKNOWN, never green on a partial read.
CHECK_RUNS_PER_PAGE = 100
MAX_CHECK_RUN_PAGES = 10
SEEN_REACTION = "eyes"  # REST's name for the reaction that records "injected into a brief" (D19)
# Check-run conclusions that make main red, and those that are green. GitHub's branch protection
# counts success, neutral and skipped as passing; anything else (cancelled, action_required, stale —
# a run GitHub gave up on after 14 days incomplete — or still running) leaves CI UNKNOWN, which
# check 7 never treats as red.
RED_CHECKS = frozenset({"failure", "timed_out", "startup_failure"})
GREEN_CHECKS = frozenset({"success", "neutral", "skipped"})


def warn(message: str) -> None:
    print(f"fleet: warning: {message}", file=sys.stderr)


def closed_by(issue: dict[str, Any]) -> tuple[str, int] | None:
    """(repository, number) of the PR that closed ``issue``, when it is closed and its latest
    close/reopen event is a close by a pull request; else None. Pure."""
    if issue.get("state") != "CLOSED":
        return None
    events = parse.nodes(issue.get("timelineItems"), "timelineItems")
    last = events[-1] if events else {}
    who = last.get("closer") if last.get("__typename") == "ClosedEvent" else None
    if not isinstance(who, dict) or who.get("__typename") != "PullRequest":
        return None
    repo = parse.obj(who.get("repository"), "closer.repository").get("nameWithOwner")
    return parse.text(repo, "closer.repository"), parse.integer(who.get("number"), "closer.number")


def ci_state(combined: dict[str, Any], runs: Sequence[Any]) -> CIState:
    """Combined commit status + check runs -> one state. Pure.

    A combined status with ``total_count`` 0 says "pending" while meaning "no statuses at all", so
    it is ignored; no signal at all is UNKNOWN, never GREEN and never RED.
    """
    states = [combined.get("state")] if combined.get("total_count") else []
    conclusions = [
        r.get("conclusion") if r.get("status") == "completed" else "pending"
        for r in runs
        if isinstance(r, dict)
    ]
    if any(s in ("failure", "error") for s in states) or RED_CHECKS & set(conclusions):
        return CIState.RED
    signals = bool(states or conclusions)
    if signals and all(s == "success" for s in states) and set(conclusions) <= GREEN_CHECKS:
        return CIState.GREEN
    return CIState.UNKNOWN


class GitHubForge:
    """Pull requests, CI and mentions of one repository."""

    def __init__(self, http: GitHubHTTP, owner: str, repo: str) -> None:
        self._http = http
        self.owner = owner
        self.repo = repo
        self.full_name = f"{owner}/{repo}"

    def pull_requests_closing(self, number: int) -> tuple[PullRequest, ...]:
        """Every PR GitHub links as closing ``number``, closed ones included. GraphQL errors
        raise: an error is never an empty tuple that reads as "no PR" (D5). A merged PR of another
        repository that GitHub records as the closer of the issue (its latest ClosedEvent) closed
        it by GitHub's rules: it carries ``closed_issue`` and is no tombstone risk."""
        data = self._http.graphql(
            q.CLOSING_PULL_REQUESTS, {"owner": self.owner, "name": self.repo, "number": number}
        )
        node = parse.obj(parse.obj(data.get("repository"), "repository").get("issue"), "issue")
        conn = node.get("closedByPullRequestsReferences")
        closer = closed_by(node)
        prs = []
        for n in parse.nodes(conn, "references"):
            pr = parse.pull_request(n, self.full_name)
            if pr.merged and closer == (pr.repository or self.full_name, pr.number):
                pr = replace(pr, closed_issue=True)
            elif pr.repository and pr.merged:
                warn(f"#{number}: {pr.repository}#{pr.number} merged in another repository but "
                     "GitHub has not closed the issue by it: a tombstone risk, not a success (D6)")  # fmt: skip
            prs.append(pr)
        return tuple(prs)

    def ci_status(self) -> CIState:
        """Check 7 is advisory and fails open: any failure to read is UNKNOWN plus a warning."""
        base = f"/repos/{self.full_name}"
        try:
            repo = parse.obj(self._http.rest("GET", base, write=False), "repository")
            branch = quote(parse.text(repo.get("default_branch"), "default_branch"), safe="")
            combined = self._http.rest("GET", f"{base}/commits/{branch}/status", write=False)
            combined = parse.obj(combined, "combined status")
            runs = self._check_runs(f"{base}/commits/{branch}/check-runs")
        except BoardError as exc:
            warn(f"CI of {self.full_name} unreadable; proceeding as unknown (D5): {exc}")
            return CIState.UNKNOWN
        return ci_state(combined, runs)

    def _check_runs(self, path: str) -> list[Any]:
        """Every check run of the ref, page by page until ``total_count`` are read. A read that
        cannot be completed raises: a partial list could be green while a later run failed."""
        runs: list[Any] = []
        for page in range(1, MAX_CHECK_RUN_PAGES + 1):
            params = {"per_page": str(CHECK_RUNS_PER_PAGE), "page": str(page)}
            got = parse.obj(self._http.rest("GET", path, write=False, params=params), "check runs")
            batch = parse.seq(got.get("check_runs"), "check_runs")
            runs += batch
            total = parse.integer(got.get("total_count"), "check runs.total_count")
            if len(runs) >= total:
                return runs
            if not batch:
                raise BoardUnreadable(f"check runs: {len(runs)} of {total} answered, then none")
        raise BoardUnreadable(
            f"check runs: more than {MAX_CHECK_RUN_PAGES * CHECK_RUNS_PER_PAGE}; not all read"
        )

    def unread_mentions(self, number: int, identity: str) -> tuple[Mention, ...]:
        """The issue's comments that mention ``identity`` and carry no 👀 of the token's user —
        the fleet's record that a brief already carried them (D19, at-least-once: the reaction is
        added only after injection, so a crash before it leaves the mention for the next run).
        The last 100 comments are read, in one document (1 point)."""
        data = self._http.graphql(
            q.MENTIONS, {"owner": self.owner, "name": self.repo, "number": number}
        )
        node = parse.obj(parse.obj(data.get("repository"), "repository").get("issue"), "issue")
        nodes = parse.nodes(node.get("comments"), f"#{number}.comments")
        seen = {
            i
            for n in nodes
            if _reacted(n.get("reactionGroups")) and isinstance(i := n.get("databaseId"), int)
        }
        return select_mentions(number, parse.comments(nodes, f"#{number}.comments"), identity,
                               seen)  # fmt: skip

    def mark_mentions_read(self, ids: Sequence[int]) -> None:
        """Called only after the mentions are in the brief (D19): a 👀 reaction on each comment,
        visible to the human who wrote it, and the record the next run reads. Reacting twice is
        answered 200 and changes nothing."""
        for cid in ids:
            self._http.rest("POST", f"/repos/{self.full_name}/issues/comments/{int(cid)}/reactions",
                            write=True, json={"content": SEEN_REACTION}, ok=(200, 201))  # fmt: skip


def _reacted(groups: Any) -> bool:
    """Whether the token's user left the 👀 reaction (GraphQL's ``EYES``) on a comment."""
    return isinstance(groups, list) and any(
        isinstance(g, dict) and g.get("content") == "EYES" and g.get("viewerHasReacted") is True
        for g in groups
    )
