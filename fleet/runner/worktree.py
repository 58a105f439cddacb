"""One workspace per run (D10): a git worktree detached at a fresh origin/main, verified before the
agent gets it, and on release removed when clean, kept and named when it holds uncommitted work.

Three details from D10: detached HEAD (a named branch can be checked out in one worktree only);
the clone path resolved physically (git writes the worktree's pointer from the path it resolved
through, so a symlinked clone mints a pointer to a path that does not exist); and a verification
that git works inside the new tree, because a broken pointer is invisible from inside a run.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from fleet.core.origin import foreign, target_origins
from fleet.core.sync import clone_lock_path
from fleet.gitexec import GitUnavailable, git
from fleet.inventory import Inventory, WorkerConfig
from fleet.runner.flock import exclusive
from fleet.runner.interrupted import prune_interrupted

# Bounds one git step on a local clone; a fetch of a large repo is the slowest we run.
GIT_TIMEOUT_S = 300


class WorktreeError(Exception):
    """The workspace could not be made or did not verify; the message says which step."""


@dataclass(frozen=True)
class Worktree:
    clone: Path
    path: Path
    base: str  # the origin/main commit it is detached at
    pruned: tuple[
        str, ...
    ] = ()  # interrupted adds removed before this one (fleet.runner.interrupted)


def _git(repo: Path, *args: str) -> str:
    """git in ``repo`` (never a repository above it): its output, or the step's WorktreeError."""
    try:
        res = git(repo, *args, timeout=GIT_TIMEOUT_S)
    except GitUnavailable as exc:
        raise WorktreeError(str(exc)) from exc
    if res.status != 0:
        tail = (res.err or res.out).strip().splitlines()
        raise WorktreeError(
            f"git {' '.join(args[:3])} exited {res.status}: {tail[-1] if tail else 'no output'}"
        )
    return res.out.strip()


def _clone_lock(clone: Path) -> AbstractContextManager[None]:
    """The same lock check 9's sync takes (fleet.core.sync): one git writer per clone at a time, so
    concurrent runs on one worker do not race ``fetch`` and ``worktree add`` on the clone."""
    return exclusive(Path(clone_lock_path(str(clone))))


def make_worktree(worker: WorkerConfig, inv: Inventory, issue: int, run_id: str) -> Worktree:
    clone = Path(os.path.realpath(os.path.expanduser(worker.clone)))  # physically (D10.2)
    with _clone_lock(clone):
        return _make(clone, worker, inv, issue, run_id)


def _make(clone: Path, worker: WorkerConfig, inv: Inventory, issue: int, run_id: str) -> Worktree:
    if not (clone / ".git").exists() and not (clone / "HEAD").exists():
        origin = inv.board.origin
        if origin is None:
            raise WorktreeError(f"clone {clone} is missing and the board names no origin")
        clone.parent.mkdir(parents=True, exist_ok=True)
        _git(clone.parent, "clone", "-q", "--", str(origin), str(clone))
    _check_origin(clone, inv)
    root = Path(os.path.realpath(os.path.expanduser(worker.state_dir))) / "worktrees"
    pruned = prune_interrupted(clone, root)  # under the clone lock: no add of ours is running
    _git(clone, "fetch", "-q", "origin")
    base = _git(clone, "rev-parse", "--verify", "origin/main")
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{issue}-{run_id}"
    _git(clone, "worktree", "add", "--detach", "-q", str(path), base)  # detached (D10.1)
    # D10.3: verify git works in the new tree and sits where we asked, at the commit we asked
    # (one rev-parse answers both, a line each).
    top, _, head = _git(path, "rev-parse", "--show-toplevel", "HEAD").partition("\n")
    if Path(top) != path or head != base:
        raise WorktreeError(f"worktree {path} did not verify (toplevel {top}, HEAD {head})")
    return Worktree(clone, path, base, tuple(pruned))


def _check_origin(clone: Path, inv: Inventory) -> None:
    """Check 9 again, at the moment it matters: an agent running beside this run shares the clone's
    ``.git/config`` and may have pointed ``origin`` elsewhere since dispatch synced it."""
    accept = target_origins(inv.board)
    if not accept.known:
        return
    urls = [_git(clone, "remote", "get-url", "origin")]
    urls.append(_git(clone, "remote", "get-url", "--push", "origin"))
    bad = foreign(urls, accept)
    if bad is not None:
        raise WorktreeError(
            f"clone {clone}: origin is {bad}, the inventory names {accept.describe()} "
            "(foreign-origin: nothing was fetched)"
        )


def release_worktree(wt: Worktree) -> bool:
    """Remove a clean worktree; keep a dirty one. Returns True when it was kept (D10: keep, do
    not wipe — the inverse of the silent wipe).

    ``git worktree remove`` without ``--force`` is the check: it removes only a tree with no
    modified and no untracked file (git-worktree(1)), running its own status first, so a status
    of ours before it would be the same work twice. Any refusal keeps the tree: the safe side."""
    try:
        _git(wt.clone, "worktree", "remove", str(wt.path))
    except WorktreeError:
        return True
    return False
