"""The forge half of the GitHub board: closing pull requests (D2, D16), CI on main (check 7), and
mentions (D19). Split from ``github.py`` so each module reads in one sitting.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from fleet.board import github_parse as parse
from fleet.board import github_queries as q
from fleet.board.base import BoardError, BoardUnreadable
from fleet.board.github_http import GitHubHTTP
from fleet.model import CIState, Mention, PullRequest

# Check runs of main read per call: 10 pages of 100 (GitHub's maximum per_page; its default is 30,
# so an unpaged read missed the 31st run). Past it CI is UNKNOWN, never green on a partial read.
CHECK_RUNS_PER_PAGE = 100
MAX_CHECK_RUN_PAGES = 10
MAX_NOTIFICATION_PAGES = 5  # unread participating threads read per call: 250 at 50 a page
NOTIFICATIONS_PER_PAGE = 50  # GitHub's maximum per_page for notifications
# Check-run conclusions that make main red, and those that are green. GitHub's branch protection
# counts success, neutral and skipped as passing; anything else (cancelled, action_required, stale —
# a run GitHub gave up on after 14 days incomplete — or still running) leaves CI UNKNOWN, which
# check 7 never treats as red.
RED_CHECKS = frozenset({"failure", "timed_out", "startup_failure"})
GREEN_CHECKS = frozenset({"success", "neutral", "skipped"})


def warn(message: str) -> None:
    print(f"fleet: warning: {message}", file=sys.stderr)


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


def mention_thread(thread: Any, full_name: str, number: int) -> dict[str, Any] | None:
    """The thread if it is an unread-able mention of issue ``number`` in ``full_name``. Pure."""
    if not isinstance(thread, dict) or thread.get("reason") != "mention":
        return None
    subject = thread.get("subject")
    repo = thread.get("repository")
    if not isinstance(subject, dict) or not isinstance(repo, dict):
        return None
    if (
        str(repo.get("full_name", "")).lower() != full_name.lower()
        or subject.get("type") != "Issue"
        or not str(subject.get("url", "")).endswith(f"/issues/{number}")
        or not str(thread.get("id", "")).isdigit()
    ):
        return None
    return thread


class GitHubForge:
    """Pull requests, CI and notifications of one repository."""

    def __init__(self, http: GitHubHTTP, owner: str, repo: str) -> None:
        self._http = http
        self.owner = owner
        self.repo = repo
        self.full_name = f"{owner}/{repo}"

    def pull_requests_closing(self, number: int) -> tuple[PullRequest, ...]:
        """Every PR GitHub links as closing ``number``, closed ones included. GraphQL errors
        raise: an error is never an empty tuple that reads as "no PR" (D5)."""
        data = self._http.graphql(
            q.CLOSING_PULL_REQUESTS, {"owner": self.owner, "name": self.repo, "number": number}
        )
        node = parse.obj(data.get("repository"), "repository").get("issue")
        conn = parse.obj(node, f"issue #{number}").get("closedByPullRequestsReferences")
        prs = tuple(parse.pull_request(n, self.full_name) for n in parse.nodes(conn, "references"))
        for pr in prs:
            if pr.repository:
                warn(
                    f"#{number}: {pr.repository}#{pr.number} references it from another "
                    "repository and cannot close it: a tombstone risk, not a success (D6)"
                )
        return prs

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

    def unread_mentions(self, number: int) -> tuple[Mention, ...]:
        """Unread participating threads whose reason is ``mention``, on this issue (D19)."""
        found: list[Mention] = []
        for page in range(1, MAX_NOTIFICATION_PAGES + 1):
            params = {"participating": "true", "all": "false",
                      "per_page": str(NOTIFICATIONS_PER_PAGE), "page": str(page)}  # fmt: skip
            got = self._http.rest("GET", "/notifications", write=False, params=params)
            threads = parse.seq(got, "notifications")
            for thread in threads:
                if (hit := mention_thread(thread, self.full_name, number)) is not None:
                    found.append(self._mention(hit, number))
            if len(threads) < NOTIFICATIONS_PER_PAGE:
                break
        return tuple(sorted(found, key=lambda m: (m.created_at, m.id)))

    def _mention(self, thread: dict[str, Any], number: int) -> Mention:
        subject = thread["subject"]
        source: Any = None
        url = subject.get("latest_comment_url") or subject.get("url")
        if isinstance(url, str) and self._http.owns(url):  # the token goes to our API host only
            source = self._http.rest("GET", url, write=False)
        source = source if isinstance(source, dict) else {}
        return Mention(
            id=int(thread["id"]),
            issue=number,
            author=parse.login(source.get("user")),
            body=str(source.get("body") or subject.get("title") or ""),
            created_at=parse.when(
                source.get("created_at") or thread.get("updated_at"), "mention.created_at"
            ),
            read=thread.get("unread") is False,
            # REST's author_association (trust.py); absent = unknown, which trusts nobody by it.
            association=source.get("author_association")
            if isinstance(source.get("author_association"), str)
            else None,
        )

    def mark_mentions_read(self, ids: Sequence[int]) -> None:
        """Called only after the mentions are in the brief: at-least-once delivery (D19)."""
        for tid in ids:
            self._http.rest("PATCH", f"/notifications/threads/{int(tid)}", write=True,
                            ok=(205, 200, 204))  # fmt: skip
