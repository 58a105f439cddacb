"""Step 8's check of what the forge cannot be told by the agent: a merge is a commit on origin ``main``.

On the embedded board the pull-request records live in a SQLite file that the agent's unix user can
write (docs/security.md): a row inserted with ``state='merged'`` and a closing body read as a merged
pull request, and the close-out posted ``✔ success`` with ``main`` untouched. So for every merged
pull request the close-out would credit to this run, the runner asks git, in the inventory's origin:

1. the record names a merge commit;
2. that commit exists in origin;
3. it is reachable from origin ``main``;
4. it was not already on ``main`` when this run's worktree was cut (``base``): ``main`` moved.

A record that fails any of them is *unproven*, and the run's outcome is ``failed`` naming it
(``merge=unproven``), never a success. On GitHub the merged state is GitHub's own, written only by a
real merge, so there is nothing to re-check there.

The git calls are I/O; :func:`why_unproven` takes their answers and decides, purely.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleet.core.model import PullRequest
from fleet.gitexec import GitUnavailable, git

GIT_TIMEOUT_S = 60  # a few object lookups in a local bare repository
_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256, as git prints them


class ProofUnavailable(Exception):
    """git could not answer (origin missing, git failed): could-not-check, never "proven" (D20)."""


@dataclass(frozen=True)
class Facts:
    """git's answers about one merge commit."""

    exists: bool
    on_main: bool
    before_run: bool  # reachable from the commit the run's worktree was cut at


def why_unproven(pr: PullRequest, facts: Facts | None) -> str | None:
    """Why ``pr``'s recorded merge is not proven on origin, or None when it is."""
    if pr.merge_commit is None or facts is None:
        return f"PR #{pr.number} is recorded merged but names no merge commit"
    short = pr.merge_commit[:12]
    if not facts.exists:
        return f"PR #{pr.number}'s merge commit {short} is not in origin"
    if not facts.on_main:
        return f"PR #{pr.number}'s merge commit {short} is not reachable from origin main"
    if facts.before_run:
        return (
            f"PR #{pr.number}'s merge commit {short} was on main before this run: main did not move"
        )
    return None


def claimed(prs: Iterable[PullRequest], started: datetime) -> tuple[PullRequest, ...]:
    """The merged PRs of our own repository the close-out would credit to this run (D16)."""
    return tuple(p for p in prs if p.merged and p.repository == "" and p.created_at >= started)


def unproven_merges(
    prs: Iterable[PullRequest],
    *,
    started: datetime,
    origin: Path,
    base: str | None,
    ask: Callable[[Path, str, str | None], Facts] | None = None,
) -> Mapping[int, str]:
    """PR number -> why, for each claimed merge that origin does not prove.

    Raises :class:`ProofUnavailable` when git cannot be asked at all.
    """
    ask = ask or git_facts
    out: dict[int, str] = {}
    for pr in claimed(prs, started):
        facts = None if pr.merge_commit is None else ask(origin, pr.merge_commit, base)
        why = why_unproven(pr, facts)
        if why is not None:
            out[pr.number] = why
    return out


def _git(origin: Path, *args: str) -> int:
    try:
        return git(origin, *args, timeout=GIT_TIMEOUT_S).status
    except GitUnavailable as exc:
        raise ProofUnavailable(f"origin {origin}: {exc}") from exc


def git_facts(origin: Path, commit: str, base: str | None) -> Facts:
    """Ask origin about ``commit``. Only a full object id is asked about: the value comes from the
    board, and anything else (a ref name, ``-x``, ``HEAD~0``) must not be resolved by git."""
    if _git(origin, "rev-parse", "--git-dir") != 0:
        raise ProofUnavailable(f"origin {origin} is not a git repository")
    if _OBJECT_ID.fullmatch(commit) is None:
        return Facts(False, False, False)
    exists = _git(origin, "cat-file", "-e", f"{commit}^{{commit}}") == 0
    if not exists:
        return Facts(False, False, False)
    on_main = _git(origin, "merge-base", "--is-ancestor", commit, "refs/heads/main") == 0
    before = base is not None and _git(origin, "merge-base", "--is-ancestor", commit, base) == 0
    return Facts(True, on_main, before)
