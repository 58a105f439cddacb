"""The embedded board: the queue in one SQLite file, the forge in one bare git origin.

The tracker IS the queue (D1), so this backend holds no cache: every method is a transaction on
the shared file, and many processes (sweeper, a human's ``invoke dispatch``, every runner) use it
at once. Writes take the lock up front (``BEGIN IMMEDIATE``) and stamp what they write from the
board clock, which is strictly increasing across processes, so comments, events and pull requests
order by time without ties (D16). Completion is derived from a real merge (D2): ``merge_pr`` merges
into origin ``main`` and closes what the body references with a real closing reference (D16's
adjacency rule, ``fleet.core.closing``); a PR living in another repository closes nothing (D6's tombstone).

Nothing here knows about markers or selection: it stores and returns what it is given.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from fleet.board.base import BoardError, BoardPage, BoardUnreadable, BoardWriteError
from fleet.board.local import forge
from fleet.board.local.schema import (
    ALL_ISSUES,
    ISSUES_IN_STATE,
    ONE_ISSUE,
    OPEN_ISSUES,
    Tx,
    connect,
    install,
    load_issues,
    unread_mentions,
)
from fleet.core.mentions import pattern as mention_pattern
from fleet.core.model import (
    CIState,
    Comment,
    EventKind,
    Issue,
    IssueState,
    Mention,
    PRState,
    PullRequest,
    StateReason,
    Status,
    iso,
)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class LocalBoard:
    """The :class:`fleet.board.base.Board` Protocol on SQLite, plus the local forge and CI."""

    def __init__(
        self,
        path: Path,
        origin: Path | None,
        *,
        identity: str = "fleet",
        repository: str = "local/origin",
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path)
        self.origin = None if origin is None else Path(origin)
        self.identity = identity
        self.repository = repository
        self._wall = clock or _utcnow
        self._lock = threading.RLock()  # one connection, serialised across this process's threads
        self._statements = 0
        # A mention is "@identity" not glued to a word, an email or a team ("@fleet/ops").
        self._mention = mention_pattern(identity)
        try:
            self._conn = connect(self.path)
        except sqlite3.Error as exc:
            raise BoardUnreadable(f"cannot open board {self.path}: {exc}") from exc
        self._conn.set_trace_callback(self._count)

    @classmethod
    def create(
        cls,
        path: Path,
        origin: Path | None,
        *,
        identity: str = "fleet",
        repository: str = "local/origin",
    ) -> LocalBoard:
        """Make the board file and the bare origin if missing (idempotent), then open the board."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        conn = connect(path, create=True)
        try:
            install(conn, _utcnow())
        finally:
            conn.close()
        if not existed:  # a new board is private (issue 16); a shared one keeps what you gave it
            for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                if part.exists():
                    os.chmod(part, 0o600)
        if origin is not None:
            forge.ensure_origin(Path(origin))
        return cls(path, origin, identity=identity, repository=repository)

    def disconnect(self) -> None:
        """Close the connection (``close`` is the Protocol's issue close)."""
        with self._lock:
            self._conn.close()

    def statements(self) -> int:
        """How many SQL statements this object has executed: the local read's cost unit (D1)."""
        return self._statements

    def _count(self, _statement: str) -> None:
        self._statements += 1

    # -- transactions ----------------------------------------------------------------------------
    @contextmanager
    def _transaction(self, begin: str, what: str, error: type[BoardError]) -> Iterator[None]:
        """One transaction under this process's lock: committed when the block ends, rolled back
        on any exception; a SQLite error is raised as ``error``, naming ``what`` was done."""
        with self._lock:
            try:
                self._conn.execute(begin)
                yield
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise error(f"board {self.path}: {what}: {exc}") from exc
            except BaseException:
                self._rollback()
                raise

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        """One read transaction: every SELECT inside sees the same board (a consistent page)."""
        with self._transaction("BEGIN", what, BoardUnreadable):
            yield self._conn

    @contextmanager
    def _writing(self, what: str) -> Iterator[Tx]:
        """One write transaction holding the write lock from its first statement."""
        with self._transaction("BEGIN IMMEDIATE", what, BoardWriteError):
            tx = Tx(self._conn, self._wall, str(self.path))
            yield tx
            tx.clock.store()

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    # -- the queue: reads ------------------------------------------------------------------------
    def read(self) -> BoardPage:
        """All open issues with everything they carry, in a constant number of statements (D1)."""
        before = self._statements
        with self._reading("read open issues") as conn:
            issues = load_issues(conn, OPEN_ISSUES)
        return BoardPage(issues, self._wall(), self._statements - before, "statements")

    def issue(self, number: int) -> Issue | None:
        with self._reading(f"read issue #{number}") as conn:
            found = load_issues(conn, ONE_ISSUE, (number,))
        return found[0] if found else None

    def list_issues(self, state: IssueState | None = None) -> tuple[Issue, ...]:
        """Every issue (or those in ``state``), for operators and tests; not the cycle's read."""
        with self._reading("list issues") as conn:
            if state is None:
                return load_issues(conn, ALL_ISSUES)
            return load_issues(conn, ISSUES_IN_STATE, (IssueState(state).value,))

    # -- the queue: writes -----------------------------------------------------------------------
    def create_issue(
        self,
        title: str,
        body: str = "",
        *,
        labels: Sequence[str] = (),
        assignees: Sequence[str] = (),
        lane: str | None = None,
        status: str | None = Status.TODO.value,
        author: str | None = None,
    ) -> int:
        """File an issue; its labels are written in the same transaction, so a probe carries the
        fixture label from the first moment any reader can see it (predicate 9)."""
        if not title.strip():
            raise BoardWriteError("an issue needs a title")
        actor = author or self.identity
        with self._writing(f"create issue {title!r}") as tx:
            at = tx.now()
            cur = tx.run(
                "INSERT INTO issues(title, body, author, state, status, lane, created_at,"
                " updated_at) VALUES (?, ?, ?, 'open', ?, ?, ?, ?)",
                (title, body, actor, status, lane, iso(at), iso(at)),
            )
            number = int(cur.lastrowid or 0)
            tx.event(number, EventKind.OPENED, actor, "", at)
            tx.label(number, labels, actor)
            tx.assign(number, assignees)
        return number

    def comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        """Store a comment and return it as stored; a closed issue takes comments too (D12)."""
        who = author or self.identity
        with self._writing(f"comment on #{number}") as tx:
            tx.require(number)
            at = tx.touch(number)
            cur = tx.run(
                "INSERT INTO comments(issue, author, body, created_at) VALUES (?, ?, ?, ?)",
                (number, who, body, iso(at)),
            )
            cid = int(cur.lastrowid or 0)
            if self._mention.search(body):
                tx.run("INSERT INTO mentions(comment, issue) VALUES (?, ?)", (cid, number))
        return Comment(cid, who, body, at)

    def close(self, number: int, reason: StateReason = StateReason.COMPLETED) -> None:
        reason = StateReason(reason)
        with self._writing(f"close #{number}") as tx:
            tx.close_issue(number, reason, self.identity)

    def reopen(self, number: int, *, author: str | None = None) -> None:
        """Reopen as ``author`` (default: the fleet's identity, whose reopen never counts as a
        release — the fleet never reopens its own work; an operator's reopen names the operator)."""
        who = author or self.identity
        with self._writing(f"reopen #{number}") as tx:
            tx.reopen_issue(number, who)

    def add_labels(self, number: int, labels: Sequence[str]) -> None:
        with self._writing(f"label #{number}") as tx:
            tx.require(number)
            if tx.label(number, labels, self.identity):
                tx.touch(number)

    def remove_label(self, number: int, label: str) -> None:
        with self._writing(f"unlabel #{number}") as tx:
            tx.require(number)
            cur = tx.run("DELETE FROM labels WHERE issue = ? AND name = ?", (number, label))
            if cur.rowcount:
                at = tx.touch(number)
                tx.event(number, EventKind.UNLABELED, self.identity, label, at)

    def assign(self, number: int, assignees: Sequence[str]) -> None:
        """Add assignees (GitHub's addAssignees): existing ones stay."""
        with self._writing(f"assign #{number}") as tx:
            tx.require(number)
            tx.assign(number, assignees)
            tx.touch(number)

    def set_status(self, number: int, status: str) -> None:
        """Set the Status field, the one predicate 1 reads (never a label)."""
        if not status.strip():
            raise BoardWriteError(f"#{number}: an empty status is not a Status option")
        self._set_column(number, "status", status)

    def set_lane(self, number: int, lane: str | None) -> None:
        self._set_column(number, "lane", lane)

    def set_parent(self, child: int, parent: int | None) -> None:
        """Make ``child`` a sub-issue of ``parent`` (None detaches it); predicate 11 reads this."""
        with self._writing(f"set parent of #{child}") as tx:
            tx.require(child)
            if parent is not None:
                tx.require(parent)
                if tx.would_cycle(child, parent):
                    raise BoardWriteError(f"#{parent} cannot be the parent of #{child}: a cycle")
            tx.run("UPDATE issues SET parent = ? WHERE number = ?", (parent, child))
            tx.touch(child)

    def add_blocker(self, number: int, blocked_by: int) -> None:
        """Record that ``blocked_by`` blocks ``number`` (D9: dependencies are edges)."""
        if number == blocked_by:
            raise BoardWriteError(f"#{number} cannot block itself")
        with self._writing(f"block #{number} by #{blocked_by}") as tx:
            tx.require(number)
            tx.require(blocked_by)
            tx.run(
                "INSERT OR IGNORE INTO blockers(issue, blocked_by) VALUES (?, ?)",
                (number, blocked_by),
            )
            tx.touch(number)

    def remove_blocker(self, number: int, blocked_by: int) -> None:
        with self._writing(f"unblock #{number} from #{blocked_by}") as tx:
            tx.require(number)
            tx.run("DELETE FROM blockers WHERE issue = ? AND blocked_by = ?", (number, blocked_by))
            tx.touch(number)

    # -- mentions (D19) --------------------------------------------------------------------------
    def unread_mentions(self, number: int) -> tuple[Mention, ...]:
        with self._reading(f"unread mentions on #{number}") as conn:
            return unread_mentions(conn, number)

    def mark_mentions_read(self, ids: Sequence[int]) -> None:
        """Mark read only after the mentions were injected: at-least-once delivery (D19)."""
        with self._writing("mark mentions read") as tx:
            for mention in ids:
                tx.run("UPDATE mentions SET read = 1 WHERE comment = ?", (int(mention),))

    # -- CI on main (pre-flight check 7) ---------------------------------------------------------
    def set_ci(self, state: CIState) -> None:
        with self._writing("set CI status") as tx:
            forge.record_ci(tx, state)

    def ci_status(self) -> CIState:
        """The last state set; UNKNOWN if never set or unreadable — never red by default (D5)."""
        try:
            with self._reading("read CI status") as conn:
                return forge.read_ci(conn)
        except BoardUnreadable as exc:
            print(f"fleet: CI status unreadable, treating it as unknown: {exc}", file=sys.stderr)
            return CIState.UNKNOWN

    # -- the forge -------------------------------------------------------------------------------
    def create_pr(
        self,
        branch: str,
        title: str,
        body: str,
        *,
        author: str = "agent",
        repository: str | None = None,
    ) -> PullRequest:
        """Open a PR for a branch pushed to origin, or record one living in another repository
        (which can never close our issues: D6's cross-repo tombstone)."""
        ours = not repository or repository.lower() == self.repository.lower()
        other = "" if ours else str(repository)
        if not other:
            forge.require_branch(self.origin, branch)
        with self._writing(f"create PR for {branch!r}") as tx:
            number = forge.insert_pr(
                tx, branch=branch, title=title, body=body, repository=other, author=author
            )
            return forge.pr_in(tx, number)

    def merge_pr(self, number: int, *, merged_by: str = "agent") -> PullRequest:
        """Merge into origin ``main`` for real, then close what the body closes (D2, D16).

        The board's write lock is held across the git merge, so two merges of one PR cannot both
        happen. If recording fails after ``main`` moved, merging again takes the fast path (the
        branch is already in main) and records it. Another repository's PR has nothing to merge
        here and closes nothing (D6).
        """
        with self._writing(f"merge PR #{number}") as tx:
            pr = forge.pr_in(tx, number)
            if pr.state is not PRState.OPEN:
                raise BoardWriteError(f"PR #{number} is {pr.state.value}: it cannot be merged")
            commit = None
            if pr.repository == "":
                if self.origin is None:
                    raise BoardWriteError("this board has no origin to merge into")
                message = f"Merge pull request #{number} from {pr.branch}\n\n{pr.title}"
                commit = forge.merge(self.origin, pr.branch, message, author=merged_by).commit
            forge.record_merge(tx, number, merged_by=merged_by, commit=commit)
            for issue in forge.closes_on_merge(pr, self.repository):
                if tx.exists(issue):
                    tx.close_issue(issue, StateReason.COMPLETED, merged_by)
            return forge.pr_in(tx, number)

    def close_pr(self, number: int) -> PullRequest:
        """Close without merging; a closed PR closes no issue."""
        with self._writing(f"close PR #{number}") as tx:
            if forge.pr_in(tx, number).state is PRState.MERGED:
                raise BoardWriteError(f"PR #{number} is merged: it cannot be closed")
            forge.record_close(tx, number)
            return forge.pr_in(tx, number)

    def pull_request(self, number: int) -> PullRequest | None:
        with self._reading(f"read PR #{number}") as conn:
            return forge.find_pr(conn, number)

    def pull_requests(self) -> tuple[PullRequest, ...]:
        with self._reading("read PRs") as conn:
            return forge.all_prs(conn)

    def pull_requests_closing(self, number: int) -> tuple[PullRequest, ...]:
        """Every PR with a real closing reference to #number (D16), another repository's PR
        included when it names ours: it cannot close the issue, and attribution must see it to
        report that tombstone risk (D6)."""
        return tuple(
            p for p in self.pull_requests() if forge.references(p, number, self.repository)
        )

    # -- helpers -------------------------------------------------------------------------------
    def _set_column(self, number: int, column: str, value: str | None) -> None:
        # ``column`` is one of this module's literals ("status", "lane"), never input.
        with self._writing(f"set {column} of #{number}") as tx:
            tx.require(number)
            tx.run(f"UPDATE issues SET {column} = ? WHERE number = ?", (value, number))
            tx.touch(number)
