"""The embedded board's storage: SQLite schema, connection settings and the board clock.

The tracker is the queue (D1), so this file is the queue on one box: many processes (the sweeper,
``invoke dispatch`` from a human's shell, every runner) write it at once. Three settings make that
safe with the standard library only: WAL (readers never block the one writer), a busy timeout (a
writer waits for the lock instead of failing), and ``BEGIN IMMEDIATE`` for every write (the write
lock is taken up front, so two read-then-write transactions can never deadlock on the upgrade).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleet.board.base import BoardWriteError
from fleet.core.model import (
    Comment,
    Event,
    EventKind,
    Issue,
    IssueRef,
    IssueState,
    Mention,
    StateReason,
    Status,
    iso,
    parse_iso,
    utc,
)

# How long a writer waits for another process's write lock before the write fails. A comment
# holds the lock ~2 ms (measured here, fsync included); a merge holds it for its git plumbing
# calls (20-90 ms). 30 s bounds a wedged holder, not a busy board: 8 processes x 50 comments in
# tests/integration/test_board_concurrency.py finish in about a second of writing.
BUSY_TIMEOUT_MS = 30_000

# The smallest step of the board clock: timestamps carry microseconds (fleet.core.model), so two
# records one tick apart still order correctly after a round trip through ISO text.
TICK = timedelta(microseconds=1)

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    last TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS issues (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    author TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'closed')),
    state_reason TEXT,
    status TEXT,
    lane TEXT,
    parent INTEGER REFERENCES issues(number),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed_at TEXT
);
CREATE INDEX IF NOT EXISTS issues_state ON issues(state);
CREATE INDEX IF NOT EXISTS issues_parent ON issues(parent);
CREATE TABLE IF NOT EXISTS labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    issue INTEGER NOT NULL REFERENCES issues(number),
    name TEXT NOT NULL,
    UNIQUE (issue, name)
);
CREATE TABLE IF NOT EXISTS assignees (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    issue INTEGER NOT NULL REFERENCES issues(number),
    login TEXT NOT NULL,
    UNIQUE (issue, login)
);
CREATE TABLE IF NOT EXISTS blockers (
    issue INTEGER NOT NULL REFERENCES issues(number),
    blocked_by INTEGER NOT NULL REFERENCES issues(number),
    PRIMARY KEY (issue, blocked_by),
    CHECK (issue <> blocked_by)
);
CREATE TABLE IF NOT EXISTS comments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    issue INTEGER NOT NULL REFERENCES issues(number),
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS comments_issue ON comments(issue, id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    issue INTEGER NOT NULL REFERENCES issues(number),
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    detail TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_issue ON events(issue, id);
CREATE TABLE IF NOT EXISTS mentions (
    comment INTEGER PRIMARY KEY REFERENCES comments(id),
    issue INTEGER NOT NULL REFERENCES issues(number),
    read INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS mentions_unread ON mentions(issue, read);
CREATE TABLE IF NOT EXISTS pull_requests (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    branch TEXT NOT NULL,
    repository TEXT NOT NULL,
    author TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'closed', 'merged')),
    created_at TEXT NOT NULL,
    merged_at TEXT,
    merged_by TEXT,
    merge_commit TEXT
);
CREATE TABLE IF NOT EXISTS ci (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    state TEXT NOT NULL,
    set_at TEXT NOT NULL
);
"""


def connect(path: Path, *, create: bool = False) -> sqlite3.Connection:
    """Open the board file with the settings every process must share.

    Without ``create`` the file must already exist (``mode=rw``): a typo in a path must not
    silently start an empty queue next to the real one.
    """
    mode = "rwc" if create else "rw"
    conn = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode={mode}",
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # we issue BEGIN/COMMIT ourselves
        check_same_thread=False,  # LocalBoard serialises use with its own lock
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def install(conn: sqlite3.Connection, now: datetime) -> None:
    """Create the schema if missing (idempotent, safe when several processes race to do it)."""
    conn.execute("PRAGMA journal_mode = WAL")  # persistent: stored in the file once set
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Not executescript(): it COMMITs first, which would drop the write lock taken above.
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("INSERT OR IGNORE INTO clock(id, last) VALUES (1, ?)", (iso(now - TICK),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class Clock:
    """The board clock inside one write transaction: strictly increasing across processes.

    Wall clocks of two processes (or one process across an NTP step) can tie or go backwards;
    markers, events and PRs are ordered by time (D16), so every write transaction takes
    ``max(now, last + 1 µs)`` from the one-row ``clock`` table and stores the last value it
    handed out. The write lock of ``BEGIN IMMEDIATE`` makes the read-modify-write atomic.
    """

    def __init__(self, conn: sqlite3.Connection, wall: Callable[[], datetime]) -> None:
        row = conn.execute("SELECT last FROM clock WHERE id = 1").fetchone()
        self._conn = conn
        self._last = parse_iso(row[0]) if row else None
        self._wall = wall
        self._dirty = False

    def tick(self) -> datetime:
        """A timestamp later than every one the board has handed out before."""
        now = utc(self._wall())  # an injected clock may hand out naive UTC
        ts = now if self._last is None or now > self._last else self._last + TICK
        self._last = ts
        self._dirty = True
        return ts

    def store(self) -> None:
        if self._dirty and self._last is not None:
            self._conn.execute(
                "INSERT INTO clock(id, last) VALUES (1, ?) "
                "ON CONFLICT(id) DO UPDATE SET last = excluded.last",
                (iso(self._last),),
            )


class Tx:
    """One write transaction on the board: its statements, its clock, and the issue verbs.

    Every write goes through here, so every row a write adds is stamped from the same strictly
    increasing clock and every missing issue fails the same way, naming the issue.
    """

    def __init__(self, conn: sqlite3.Connection, wall: Callable[[], datetime], board: str) -> None:
        self.conn = conn
        self.clock = Clock(conn, wall)
        self.board = board

    def run(self, sql: str, params: tuple[object, ...] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def now(self) -> datetime:
        return self.clock.tick()

    def require(self, number: int) -> IssueState:
        """The issue's state; a missing issue is a failed write that names it."""
        row = self.run("SELECT state FROM issues WHERE number = ?", (number,)).fetchone()
        if row is None:
            raise BoardWriteError(f"no issue #{number} on board {self.board}")
        return IssueState(row[0])

    def exists(self, number: int) -> bool:
        return self.run("SELECT 1 FROM issues WHERE number = ?", (number,)).fetchone() is not None

    def touch(self, number: int) -> datetime:
        """Stamp the issue as updated now, and return that now for the row being written."""
        at = self.now()
        self.run("UPDATE issues SET updated_at = ? WHERE number = ?", (iso(at), number))
        return at

    def event(self, number: int, kind: EventKind, actor: str, detail: str, at: datetime) -> None:
        self.run(
            "INSERT INTO events(issue, kind, actor, detail, at) VALUES (?, ?, ?, ?, ?)",
            (number, kind.value, actor, detail, iso(at)),
        )

    def label(self, number: int, labels: Sequence[str], actor: str) -> bool:
        """Add labels not yet present, each with a ``labeled`` event; True if any was added."""
        added = False
        for name in names(labels, "label"):
            cur = self.run(
                "INSERT OR IGNORE INTO labels(issue, name) VALUES (?, ?)", (number, name)
            )
            if cur.rowcount:
                self.event(number, EventKind.LABELED, actor, name, self.now())
                added = True
        return added

    def assign(self, number: int, logins: Sequence[str]) -> None:
        for login in names(logins, "assignee"):
            self.run("INSERT OR IGNORE INTO assignees(issue, login) VALUES (?, ?)", (number, login))

    def close_issue(self, number: int, reason: StateReason, actor: str) -> None:
        """Close with a reason; closing a closed issue changes nothing and records nothing."""
        self._move(number, IssueState.CLOSED, reason, Status.DONE, actor)

    def reopen_issue(self, number: int, actor: str) -> None:
        """Reopen into Todo; reopening an open issue changes nothing and records nothing."""
        self._move(number, IssueState.OPEN, None, Status.TODO, actor)

    def _move(
        self,
        number: int,
        state: IssueState,
        reason: StateReason | None,
        status: Status,
        actor: str,
    ) -> None:
        if self.require(number) is state:
            return
        at = self.touch(number)
        closed = state is IssueState.CLOSED
        self.run(
            "UPDATE issues SET state = ?, state_reason = ?, closed_at = ?, status = ?"
            " WHERE number = ?",
            (
                state.value,
                None if reason is None else reason.value,
                iso(at) if closed else None,
                status.value,
                number,
            ),
        )
        kind = EventKind.CLOSED if closed else EventKind.REOPENED
        self.event(number, kind, actor, "" if reason is None else reason.value, at)

    def would_cycle(self, child: int, parent: int) -> bool:
        """True when ``child`` is ``parent`` or one of its ancestors: the edge would close a loop."""
        row = self.run(
            "WITH RECURSIVE up(n) AS (SELECT ? UNION SELECT i.parent FROM issues i"
            " JOIN up ON i.number = up.n WHERE i.parent IS NOT NULL)"
            " SELECT 1 FROM up WHERE n = ?",
            (parent, child),
        ).fetchone()
        return row is not None


def names(values: Sequence[str], what: str) -> tuple[str, ...]:
    """Non-empty, stripped, de-duplicated in order; a bare string is one name, not its letters."""
    items = [values] if isinstance(values, str) else list(values)
    found: list[str] = []
    for value in items:
        name = str(value).strip()
        if not name:
            raise BoardWriteError(f"an empty {what} name")
        if name not in found:
            found.append(name)
    return tuple(found)


# -- reading: a constant number of statements, whatever the number of issues (D1) -------------------
#
# Each filter is a WHERE clause over the alias ``i`` (the issues being read). They are constants of
# this module, never built from input; values travel as bound parameters.
OPEN_ISSUES = "i.state = 'open'"
ONE_ISSUE = "i.number = ?"
ISSUES_IN_STATE = "i.state = ?"
ALL_ISSUES = "1 = 1"

_QUERIES = {
    "issues": "SELECT i.number, i.title, i.body, i.state, i.state_reason, i.status, i.lane,"
    " i.parent, p.state, i.created_at, i.updated_at, i.closed_at, i.author"
    " FROM issues i LEFT JOIN issues p ON p.number = i.parent WHERE {w} ORDER BY i.number",
    "labels": "SELECT l.issue, l.name FROM labels l JOIN issues i ON i.number = l.issue"
    " WHERE {w} ORDER BY l.id",
    "assignees": "SELECT a.issue, a.login FROM assignees a JOIN issues i ON i.number = a.issue"
    " WHERE {w} ORDER BY a.id",
    "comments": "SELECT c.issue, c.id, c.author, c.body, c.created_at FROM comments c"
    " JOIN issues i ON i.number = c.issue WHERE {w} ORDER BY c.id",
    "events": "SELECT e.issue, e.kind, e.at, e.actor, e.detail FROM events e"
    " JOIN issues i ON i.number = e.issue WHERE {w} ORDER BY e.id",
    "blockers": "SELECT b.issue, b.blocked_by, x.state FROM blockers b"
    " JOIN issues i ON i.number = b.issue JOIN issues x ON x.number = b.blocked_by"
    " WHERE {w} ORDER BY b.blocked_by",
    "sub_issues": "SELECT s.parent, s.number, s.state FROM issues s"
    " JOIN issues i ON i.number = s.parent WHERE {w} ORDER BY s.number",
}


def load_issues(
    conn: sqlite3.Connection, where: str, params: tuple[object, ...] = ()
) -> tuple[Issue, ...]:
    """Every issue matching ``where`` with all it carries, in seven SELECTs (never one per issue).

    The caller holds a read transaction, so the seven statements see one consistent board.
    """
    rows = {
        name: conn.execute(sql.format(w=where), params).fetchall() for name, sql in _QUERIES.items()
    }
    per: dict[str, dict[int, list[Any]]] = {name: {} for name in _QUERIES}
    for name in ("labels", "assignees"):
        for issue, value in rows[name]:
            per[name].setdefault(issue, []).append(value)
    for issue, cid, author, body, created in rows["comments"]:
        per["comments"].setdefault(issue, []).append(Comment(cid, author, body, stamp(created)))
    for issue, kind, at, actor, detail in rows["events"]:
        per["events"].setdefault(issue, []).append(Event(EventKind(kind), stamp(at), actor, detail))
    for name in ("blockers", "sub_issues"):
        for issue, other, state in rows[name]:
            per[name].setdefault(issue, []).append(IssueRef(other, IssueState(state)))
    return tuple(_issue(row, per) for row in rows["issues"])


def unread_mentions(conn: sqlite3.Connection, number: int) -> tuple[Mention, ...]:
    rows = conn.execute(
        "SELECT c.id, c.issue, c.author, c.body, c.created_at FROM mentions m"
        " JOIN comments c ON c.id = m.comment WHERE m.issue = ? AND m.read = 0 ORDER BY c.id",
        (number,),
    ).fetchall()
    return tuple(Mention(r[0], r[1], r[2], r[3], stamp(r[4])) for r in rows)


def _issue(row: tuple[Any, ...], per: dict[str, dict[int, list[Any]]]) -> Issue:
    number, title, body, state, reason, status, lane, parent, parent_state = row[:9]
    created, updated, closed, author = row[9:]
    n = int(number)

    def many(name: str) -> tuple[Any, ...]:
        return tuple(per[name].get(n, ()))

    return Issue(
        number=n,
        title=str(title),
        body=str(body),
        state=IssueState(state),
        state_reason=StateReason(reason) if reason else None,
        labels=many("labels"),
        assignees=many("assignees"),
        status=None if status is None else str(status),
        lane=None if lane is None else str(lane),
        parent=None if parent is None else IssueRef(int(parent), IssueState(parent_state)),
        blocked_by=many("blockers"),
        sub_issues=many("sub_issues"),
        comments=many("comments"),
        events=many("events"),
        created_at=parse_iso(str(created)),
        updated_at=parse_iso(str(updated)),
        closed_at=parse_iso(closed),
        author=str(author),
    )


def stamp(text: str) -> datetime:
    """A stored timestamp; the schema declares them NOT NULL, so empty means a damaged board."""
    ts = parse_iso(text)
    if ts is None:
        raise sqlite3.DatabaseError("a board row has an empty timestamp")
    return ts
