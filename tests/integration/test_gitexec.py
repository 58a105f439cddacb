"""One git process (fleet.gitexec), as the forge, the worktree and the merge proof run it: in the
directory they name and never a repository above it, and git that cannot run is said as such."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleet.board.local import forge
from fleet.gitexec import NOT_A_REPOSITORY, GitUnavailable, git
from fleet.runner import merge_proof
from fleet.runner.worktree import Worktree, release_worktree

SHA = "0" * 40


@pytest.fixture
def inside(tmp_path: Path) -> Path:
    """A plain directory inside a repository with a ``main``: git run there without a ceiling
    would answer for the outer repository."""
    outer = tmp_path / "outer"
    subprocess.run(["git", "init", "-q", "-b", "main", str(outer)], check=True)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(
        ["git", "-C", str(outer), *ident, "commit", "-q", "--allow-empty", "-m", "x"], check=True
    )
    (outer / "origin.git").mkdir()
    return outer / "origin.git"


def test_a_directory_that_is_no_repository_answers_for_itself_not_its_parent(inside: Path) -> None:
    assert git(inside.parent, "rev-parse", "--verify", "main", timeout=30).status == 0
    assert git(inside, "rev-parse", "--git-dir", timeout=30).status == NOT_A_REPOSITORY
    with pytest.raises(forge.ForgeError, match="is not a git repository"):
        forge.tip(inside, "main")
    with pytest.raises(merge_proof.ProofUnavailable, match="not a git repository"):
        merge_proof.git_facts(inside, SHA, None)


def test_git_that_cannot_run_is_unavailable_and_each_caller_names_it(
    inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(inside))  # no git on it
    with pytest.raises(GitUnavailable):
        git(inside, "status", timeout=30)
    with pytest.raises(forge.ForgeError):
        forge.tip(inside, "main")
    with pytest.raises(merge_proof.ProofUnavailable):
        merge_proof.git_facts(inside, SHA, None)
    kept = release_worktree(Worktree(inside, inside / "tree", SHA))
    assert kept  # git could not say the tree is clean: keeping is the safe side
