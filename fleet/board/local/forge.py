"""The local forge: pull requests on the board file, real merges in a bare git origin.

Completion is a merged pull request (D2): the merge must be a state change in a system the agent
does not own, so the local forge performs it itself, in the bare origin, with git plumbing only.
``merge-tree --write-tree`` computes the merge in the object store, ``commit-tree`` mints the merge
commit under the forge's identity (D18: the merge identity belongs to the forge, not to a git
config), and ``update-ref`` moves ``main`` with a compare-and-swap, so a push that lands in between
is never overwritten. The PR records live in the board file next to the issues they close;
``local.py`` runs both halves inside one board transaction.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from fleet.board.base import BoardWriteError
from fleet.board.local.schema import Tx, stamp
from fleet.core.closing import closing_refs
from fleet.core.model import CIState, PRState, PullRequest, iso, parse_iso

if TYPE_CHECKING:
    import git

MAIN = "refs/heads/main"

# The committer of every merge commit: the forge, whoever pressed the button (D18). The author is
# the caller of merge_pr, the way a hosted forge authors a merge by the API caller.
FORGE_NAME = "fleet local forge"
FORGE_EMAIL = "forge@fleet.invalid"

# How often a merge is recomputed when ``main`` moved between reading it and swapping it. Each
# retry needs a push to land inside one merge's window (20-90 ms measured here for the plumbing
# calls), so three moves in a row means something is rewriting main in a loop: fail loudly.
MERGE_ATTEMPTS = 3

# merge-tree --write-tree exits 1 on conflicts (git-merge-tree(1), git >= 2.38).
_CONFLICT_EXIT = 1


class ForgeError(BoardWriteError):
    """A git operation on the origin failed; the board recorded nothing."""


class MergeConflict(BoardWriteError):
    """The branch does not merge cleanly into main; origin is left untouched.

    A distinct name from :class:`ForgeError` (D20): a conflict is the agent's to resolve, a broken
    origin is the operator's.
    """


@dataclass(frozen=True)
class MergeResult:
    commit: str  # the new tip of main
    fast_path: bool  # the branch was already contained in main: nothing was written


def ensure_origin(path: Path) -> None:
    """Make ``path`` a bare repository whose ``main`` has one commit (a README), if it is not.

    Idempotent: an existing origin with a ``main`` is left exactly as it is.
    """
    import git  # GitPython only where the origin is touched: a board read never needs it

    try:
        repo = git.Repo(path)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError):
        repo = git.Repo.init(path, bare=True, mkdir=True, initial_branch="main")
    if tip(path, "main") is not None:
        return
    g = repo.git
    with _stdin(b"# origin\n\nThe fleet's local origin.\n") as readme:
        blob = g.hash_object("-w", "--stdin", istream=readme)
    with _stdin(f"100644 blob {blob}\tREADME.md\n".encode()) as listing:
        tree = g.mktree(istream=listing)
    commit = g.commit_tree(tree, "-m", "Initial commit", env=_identity(FORGE_NAME))
    # Zero old value: create only if absent, so two racing create() calls keep one history.
    status, _, _ = g.update_ref(
        MAIN, commit, "0" * 40, with_extended_output=True, with_exceptions=False
    )
    if status != 0 and tip(path, "main") is None:
        raise ForgeError(f"could not create main in origin {path}")
    g.symbolic_ref("HEAD", MAIN)


def require_branch(origin: Path | None, branch: str) -> None:
    """A PR of our repository names a branch that was pushed to origin; anything else is refused."""
    if not branch.strip() or branch.startswith("-"):
        raise BoardWriteError(f"{branch!r} is not a branch name")
    if origin is None:
        raise BoardWriteError("this board has no origin: a PR needs a pushed branch")
    if tip(origin, branch) is None:
        raise BoardWriteError(f"branch {branch!r} is not in origin {origin}")


def tip(origin: Path, branch: str) -> str | None:
    """The commit ``refs/heads/<branch>`` points at, or None when there is no such branch."""
    status, out, _ = _repo(origin).git.rev_parse(
        "--verify",
        "--quiet",
        f"refs/heads/{branch}^{{commit}}",
        with_extended_output=True,
        with_exceptions=False,
    )
    return out.strip() if status == 0 and out.strip() else None


def merge(origin: Path, branch: str, message: str, *, author: str) -> MergeResult:
    """Merge ``refs/heads/<branch>`` into ``main`` in the bare origin; raise on a conflict.

    Atomic from the outside: ``main`` either moves to the new merge commit or does not move.
    """
    import git

    try:
        return _merge(_repo(origin).git, origin, branch, message, author)
    except git.GitCommandError as exc:
        raise ForgeError(f"git failed while merging {branch!r} in {origin}: {exc}") from exc


def _merge(g: git.Git, origin: Path, branch: str, message: str, author: str) -> MergeResult:
    for _ in range(MERGE_ATTEMPTS):
        head = tip(origin, branch)
        if head is None:
            raise ForgeError(f"branch {branch!r} is not in origin {origin}")
        base = tip(origin, "main")
        if base is None:
            raise ForgeError(f"origin {origin} has no main")
        if _is_ancestor(g, head, base):
            return MergeResult(commit=base, fast_path=True)
        tree = _merge_tree(g, base, head, branch)
        commit = g.commit_tree(tree, "-p", base, "-p", head, "-m", message, env=_identity(author))
        status, _, _ = g.update_ref(
            MAIN, commit, base, with_extended_output=True, with_exceptions=False
        )
        if status == 0:
            return MergeResult(commit=commit, fast_path=False)
    raise ForgeError(f"main in origin {origin} kept moving: gave up after {MERGE_ATTEMPTS} tries")


def _merge_tree(g: git.Git, base: str, head: str, branch: str) -> str:
    status, out, err = g.merge_tree(
        "--write-tree",
        "--name-only",
        "--no-messages",
        base,
        head,
        with_extended_output=True,
        with_exceptions=False,
    )
    if status == _CONFLICT_EXIT:
        files = ", ".join(line for line in out.splitlines()[1:] if line.strip())
        raise MergeConflict(f"merge conflict: {branch!r} does not merge into main ({files})")
    if status != 0:
        raise ForgeError(f"git merge-tree failed ({status}): {err.strip()}")
    return out.splitlines()[0].strip()


def _is_ancestor(g: git.Git, commit: str, of: str) -> bool:
    status, _, _ = g.merge_base(
        "--is-ancestor", commit, of, with_extended_output=True, with_exceptions=False
    )
    return status == 0


def _identity(author: str) -> dict[str, str]:
    """Author = the caller, committer = the forge; fixed in the environment, never a git config."""
    return {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{re.sub(r'[^A-Za-z0-9._-]+', '-', author)}@fleet.invalid",
        "GIT_COMMITTER_NAME": FORGE_NAME,
        "GIT_COMMITTER_EMAIL": FORGE_EMAIL,
    }


def _repo(origin: Path) -> git.Repo:
    import git

    try:
        return git.Repo(origin)
    except (git.NoSuchPathError, git.InvalidGitRepositoryError) as exc:
        raise ForgeError(f"origin {origin} is not a git repository") from exc


def _stdin(data: bytes) -> IO[bytes]:
    """A real file for GitPython's ``istream``: it becomes the child's stdin, so it needs a fd.
    The caller closes it (``with _stdin(...) as f``)."""
    handle = tempfile.TemporaryFile()  # noqa: SIM115 - returned open, closed by the caller
    handle.write(data)
    handle.seek(0)
    return handle


# -- pull-request records on the board file ------------------------------------------------------

PR_COLUMNS = (
    "number, title, body, branch, state, created_at, merged_at, repository, author, merge_commit"
)


def pr_from_row(row: tuple[Any, ...]) -> PullRequest:
    number, title, body, branch, state, created, merged_at, repository, author, commit = row
    return PullRequest(
        number=int(number),
        title=str(title),
        body=str(body),
        branch=str(branch),
        state=PRState(state),
        merged=state == PRState.MERGED.value,
        created_at=stamp(created),
        merged_at=parse_iso(merged_at),
        repository=str(repository),
        author=str(author),
        merge_commit=None if commit is None else str(commit),
    )


def find_pr(conn: sqlite3.Connection, number: int) -> PullRequest | None:
    row = conn.execute(f"SELECT {PR_COLUMNS} FROM pull_requests WHERE number = ?", (number,))
    found = row.fetchone()
    return None if found is None else pr_from_row(found)


def pr_in(tx: Tx, number: int) -> PullRequest:
    """The PR inside a write; a missing one is a failed write that names it."""
    pr = find_pr(tx.conn, number)
    if pr is None:
        raise BoardWriteError(f"no pull request #{number} on board {tx.board}")
    return pr


def all_prs(conn: sqlite3.Connection) -> tuple[PullRequest, ...]:
    rows = conn.execute(f"SELECT {PR_COLUMNS} FROM pull_requests ORDER BY number").fetchall()
    return tuple(pr_from_row(r) for r in rows)


def insert_pr(tx: Tx, *, branch: str, title: str, body: str, repository: str, author: str) -> int:
    cur = tx.run(
        "INSERT INTO pull_requests(title, body, branch, repository, author, state, created_at)"
        " VALUES (?, ?, ?, ?, ?, 'open', ?)",
        (title, body, branch, repository, author, iso(tx.now())),
    )
    return int(cur.lastrowid or 0)


def record_merge(tx: Tx, number: int, *, merged_by: str, commit: str | None) -> None:
    tx.run(
        "UPDATE pull_requests SET state = 'merged', merged_at = ?, merged_by = ?,"
        " merge_commit = ? WHERE number = ?",
        (iso(tx.now()), merged_by, commit, number),
    )


def record_close(tx: Tx, number: int) -> None:
    tx.run("UPDATE pull_requests SET state = 'closed' WHERE number = ?", (number,))


def record_ci(tx: Tx, state: CIState) -> None:
    """Set the CI state of origin main, which pre-flight check 7 reads."""
    tx.run(
        "INSERT INTO ci(id, state, set_at) VALUES (1, ?, ?) ON CONFLICT(id) DO UPDATE"
        " SET state = excluded.state, set_at = excluded.set_at",
        (CIState(state).value, iso(tx.now())),
    )


def read_ci(conn: sqlite3.Connection) -> CIState:
    """The last CI state set; UNKNOWN when none was ever set (never red by default)."""
    row = conn.execute("SELECT state FROM ci WHERE id = 1").fetchone()
    return CIState.UNKNOWN if row is None else CIState(row[0])


def references(pr: PullRequest, number: int, repository: str) -> bool:
    """True when ``pr`` has a real closing reference (D16) to issue ``number`` of ``repository``.

    A PR of ``repository`` itself references it with ``#N`` or ``repository#N``. A PR living in
    another repository references it only by naming ``repository`` explicitly — and even then it
    cannot close it (D6's cross-repo tombstone); attribution still needs to see it.
    """
    ours = repository.lower()
    for ref in closing_refs(pr.body):
        if ref.number != number:
            continue
        if (pr.repository == "" and ref.same_repo(ours)) or ref.repository == ours:
            return True
    return False


def closes_on_merge(pr: PullRequest, repository: str) -> tuple[int, ...]:
    """The issues of ``repository`` that merging ``pr`` closes: none for another repo's PR."""
    if pr.repository != "":
        return ()
    return tuple(ref.number for ref in closing_refs(pr.body) if ref.same_repo(repository))
