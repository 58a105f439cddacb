"""What an interrupted ``git worktree add`` leaves behind, found and removed (run step 5, D10).

``git worktree add`` first writes the new entry's admin directory (``.git/worktrees/<name>``) with a
``locked`` file whose reason is ``initializing`` and a placeholder all-zero ``HEAD``, then sets
``HEAD``, checks the tree out and unlocks. Git cleans up after itself on SIGTERM; a SIGKILL midway
leaves the entry locked — so ``git worktree prune`` skips it — and, killed before ``HEAD`` was set,
breaks every later fetch in the clone ("fatal: bad object worktrees/<name>/HEAD"). Called under the
clone lock, where no add of ours can be running, such an entry is known to be dead: its admin
directory goes, and its checkout too when it lies under this worker's own worktree root (a path
elsewhere is not ours to delete, so it is only named). ``fleet.core.sync`` does the same for check 9.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

INITIALIZING = "initializing"  # git's own lock reason while ``worktree add`` runs
_PRUNE_TIMEOUT_S = 60


def _common_dir(clone: Path) -> Path:
    dot_git = clone / ".git"
    return dot_git if dot_git.is_dir() else clone  # a bare clone is its own common dir


def interrupted_entries(clone: Path) -> list[Path]:
    """The admin directories of adds that never finished: locked with git's ``initializing``."""
    found = []
    for lock in sorted((_common_dir(clone) / "worktrees").glob("*/locked")):
        try:
            if lock.read_text(encoding="utf-8", errors="replace").strip() == INITIALIZING:
                found.append(lock.parent)
        except OSError:
            continue
    return found


def prune_interrupted(clone: Path, root: Path) -> list[str]:
    """Remove every interrupted add of ``clone``; one line per removal, for the run's log."""
    said: list[str] = []
    for admin in interrupted_entries(clone):
        checkout = _checkout_of(admin)
        shutil.rmtree(admin, ignore_errors=True)
        line = f"removed an interrupted worktree add: {admin}"
        if checkout is not None and checkout.is_relative_to(root) and checkout.exists():
            shutil.rmtree(checkout, ignore_errors=True)
            line += f" and its half-made checkout {checkout}"
        elif checkout is not None and checkout.exists():
            line += f"; its checkout {checkout} is outside {root}, left in place"
        said.append(line)
    if said:
        subprocess.run(
            ["git", "worktree", "prune"],
            cwd=clone,
            capture_output=True,
            timeout=_PRUNE_TIMEOUT_S,
            check=False,
        )
    return said


def _checkout_of(admin: Path) -> Path | None:
    """The checkout an admin entry names: its ``gitdir`` file holds ``<checkout>/.git``."""
    try:
        text = (admin / "gitdir").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text).parent if text else None
