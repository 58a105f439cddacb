"""The Board contract suite (huey's one-suite-many-backends): its ``Forge`` interface and the
git helper the local forge and the integration tests share.

``push_branch`` is how an agent hands work to the local forge: clone the origin, commit, push a
branch, so a PR in any test names a branch that really exists in the bare origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import git

from fleet.core.model import CIState, Comment, PullRequest

# An identity for test commits, so a test never depends on the operator's git config.
_AUTHOR = git.Actor("test agent", "agent@fleet.invalid")


def push_branch(
    origin: Path, branch: str, files: Mapping[str, str], workdir: Path, *, base: str = "main"
) -> str:
    """Commit ``files`` on a new ``branch`` cut from ``base`` and push it; return the commit sha."""
    clone = git.Repo.clone_from(str(origin), str(workdir / f"clone-{branch.replace('/', '-')}"))
    clone.git.checkout("-B", branch, f"origin/{base}")
    for name, text in files.items():
        path = Path(clone.working_tree_dir or "") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        clone.index.add([name])
    commit = clone.index.commit(f"change on {branch}", author=_AUTHOR, committer=_AUTHOR)
    clone.git.push("origin", f"refs/heads/{branch}:refs/heads/{branch}")
    return commit.hexsha


class Forge(Protocol):
    """Backend-specific setup the contract tests need, behind one small interface."""

    def open_pr(self, body: str, *, title: str = "a change") -> PullRequest:
        """Push a fresh branch with a real change and open a PR for it in the board's repo."""
        ...

    def merge(self, pr: PullRequest) -> PullRequest: ...

    def set_ci(self, state: CIState) -> None: ...

    def comment_as(self, number: int, body: str, author: str) -> Comment:
        """A comment by someone other than the fleet, written the way that person's own client
        would: one token cannot write as two people (the GitHub board refuses, D18, D20)."""
        ...
