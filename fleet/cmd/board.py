"""``invoke board.*`` and ``pr.*``: the operator's, the tests' and the agents' way into the
embedded board and forge. Every write goes through the Board Protocol (or the local forge's own
extras for PRs and CI), never around it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import SupportsIndex, SupportsInt

from fleet.board.base import BoardError, LabelsDropped
from fleet.cmd.common import context, emit_json, fail, say
from fleet.control.switches import operator
from fleet.core.exits import Exit
from fleet.core.markers import history
from fleet.core.model import CIState, Issue, IssueState, Policy, StateReason
from fleet.core.safe_text import printable


def _local(board: object) -> object:
    if not hasattr(board, "create_pr"):
        raise fail(Exit.USAGE, "this command needs the embedded board (board.kind: local)")
    return board


def add(
    inv: str | None,
    title: str,
    body: str,
    labels: list[str],
    lane: str | None,
    assignees: list[str],
    status: str,
    fixture: bool,
    author: str | None,
) -> int:
    with context(inv, create=True) as ctx:
        tags = list(labels) + ([ctx.inventory.policy.fixture_label] if fixture else [])
        try:
            n = ctx.board.create_issue(
                title,
                body,
                labels=tags,
                assignees=assignees,
                lane=lane,
                status=status,
                author=author,
            )
        except LabelsDropped as exc:  # filed, closed at once: a probe without its label is work
            raise fail(Exit.LABELS_DROPPED, str(exc)) from None
        except BoardError as exc:
            raise fail(Exit.WRITE_FAILED, str(exc)) from None
        print(n)
        return n


def show(inv: str | None, number: int, as_json: bool) -> None:
    with context(inv) as ctx:
        try:
            issue = ctx.board.issue(number)
        except BoardError as exc:
            raise fail(Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
        if issue is None:
            raise fail(Exit.ISSUE_MISSING, f"#{number}: no such issue")
        if as_json:
            emit_json(_issue_json(issue, ctx.inventory.policy))
            return
        say(
            f"#{issue.number} [{issue.state}{'/' + issue.state_reason if issue.state_reason else ''}]"
            f" {printable(issue.title)}"
        )
        say(
            f"  status={issue.status} lane={issue.lane or '-'} labels={','.join(issue.labels) or '-'}"
            f" assignees={','.join(issue.assignees) or '-'}"
        )
        if issue.parent:
            say(f"  parent #{issue.parent.number} ({issue.parent.state})")
        for b in issue.blocked_by:
            say(f"  blocked by #{b.number} ({b.state})")
        if issue.body:
            say("  " + issue.body.replace("\n", "\n  "))
        for c in issue.comments:
            say(f"  -- {c.author} at {c.created_at.isoformat(timespec='microseconds')}")
            say("     " + c.body.replace("\n", "\n     "))


def _issue_json(issue: Issue, policy: Policy) -> dict[str, object]:
    h = history(issue, policy)
    last = h.last_marker
    return {
        "number": issue.number,
        "title": issue.title,
        "state": str(issue.state),
        "state_reason": issue.state_reason,
        "status": issue.status,
        "lane": issue.lane,
        "labels": list(issue.labels),
        "assignees": list(issue.assignees),
        "parent": issue.parent.number if issue.parent else None,
        "blocked_by": [b.number for b in issue.blocked_by],
        "last_marker": str(last.kind) if last else None,
        "attempts": h.attempts,
        "comments": [
            {"id": c.id, "author": c.author, "body": c.body, "created_at": c.created_at.isoformat()}
            for c in issue.comments
        ],
    }


def list_(inv: str | None, state: str | None, as_json: bool) -> None:
    with context(inv) as ctx:
        want = IssueState(state) if state else None
        try:
            if hasattr(ctx.board, "list_issues"):
                issues = ctx.board.list_issues(want)
            elif want in (None, IssueState.OPEN):  # GitHub: the queue's own read, open issues
                issues = ctx.board.read().issues
            else:
                raise fail(Exit.USAGE, "a GitHub board lists its open issues only (the queue)")
        except BoardError as exc:
            raise fail(Exit.BOARD_UNREADABLE, f"board unreadable: {exc}") from None
        if as_json:
            emit_json({"issues": [_issue_json(i, ctx.inventory.policy) for i in issues]})
            return
        for i in issues:
            say(f"#{i.number:<5} {i.state:<6} {i.status or '-':<12} {printable(i.title)}")


def comment(inv: str | None, number: int, body: str, author: str | None) -> None:
    with context(inv, writes=True) as ctx:
        # GitHub writes as the token's user and refuses any other author; the embedded board
        # files an operator's words under "operator" unless told who.
        github = callable(getattr(ctx.board, "check_identity", None))
        try:
            c = ctx.board.comment(number, body, author=author or (None if github else "operator"))
        except BoardError as exc:
            raise fail(Exit.WRITE_FAILED, str(exc)) from None
        print(c.id)


def _names(value: object) -> list[str]:
    """A list write's value (invoke hands an ``iterable`` option over as a list of strings)."""
    if not isinstance(value, Iterable):
        raise TypeError(f"{type(value).__name__!r} object is not iterable")  # as list() says
    return list(value)


def _number(value: object) -> int:
    """An issue number write's value (invoke hands it over as text)."""
    if not isinstance(value, str | bytes | bytearray | SupportsInt | SupportsIndex):
        raise TypeError(  # as int() says
            "int() argument must be a string, a bytes-like object or a real number, "
            f"not {type(value).__name__!r}"
        )
    return int(value)


def write(inv: str | None, number: int, op: str, value: object = None) -> None:
    """The small board writes, one Protocol call each."""
    with context(inv) as ctx:
        b = ctx.board
        try:
            if op == "label":
                b.add_labels(number, _names(value))
            elif op == "unlabel":
                b.remove_label(number, str(value))
            elif op == "assign":
                b.assign(number, _names(value))
            elif op == "block":
                b.add_blocker(number, _number(value))
            elif op == "unblock":
                b.remove_blocker(number, _number(value))
            elif op == "parent":
                b.set_parent(number, None if value in (None, 0) else _number(value))
            elif op == "status":
                b.set_status(number, str(value))
            elif op == "lane":
                b.set_lane(number, None if value in (None, "") else str(value))
            elif op == "close":
                b.close(number, StateReason(str(value)))
            elif op == "reopen":
                # The embedded board records who reopened (a reopen counts only from a trusted
                # human); GitHub records the token's user whatever we say.
                b.reopen(number, author=operator() if hasattr(b, "create_pr") else None)
            else:
                raise fail(Exit.USAGE, f"unknown board operation {op!r}")
        except BoardError as exc:
            raise fail(Exit.WRITE_FAILED, str(exc)) from None


def ci(inv: str | None, state: str | None) -> None:
    with context(inv, create=True) as ctx:
        if state is not None:
            _local(ctx.board).set_ci(CIState(state))  # type: ignore[attr-defined]
        print(ctx.board.ci_status())


def pr_create(inv: str | None, branch: str, title: str, body: str, author: str | None) -> None:
    with context(inv) as ctx:
        try:
            pr = _local(ctx.board).create_pr(branch, title, body, author=author or "agent")  # type: ignore[attr-defined]
        except BoardError as exc:
            raise fail(Exit.WRITE_FAILED, str(exc)) from None
        print(pr.number)


def pr_merge(inv: str | None, number: int, merged_by: str | None) -> None:
    with context(inv) as ctx:
        try:
            pr = _local(ctx.board).merge_pr(number, merged_by=merged_by or "agent")  # type: ignore[attr-defined]
        except BoardError as exc:
            raise fail(Exit.WRITE_FAILED, str(exc)) from None
        print(f"merged #{pr.number} at {pr.merged_at}")
