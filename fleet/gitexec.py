"""One git command as a process: bounded, its answer whole (exit status, output, errors).

The embedded forge's plumbing in its origin, the runner's worktrees and its merge proof all run git
this way: plain processes, no git library loaded for a handful of calls. ``repo`` is where git
runs, and its parent is a ceiling (``GIT_CEILING_DIRECTORIES``): git uses ``repo`` itself and never
a repository above it, so a directory that is no repository answers 128 instead of its parent
repository's answers.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

NOT_A_REPOSITORY = 128  # git's exit when pointed at a directory that is no repository ("fatal")


class GitUnavailable(Exception):
    """git could not be run at all: not installed, or past its timeout. Says nothing of ``repo``."""


@dataclass(frozen=True)
class GitAnswer:
    status: int
    out: str  # stdout, its trailing newlines removed
    err: str  # stderr, stripped


def git(
    repo: Path,
    *args: str,
    timeout: float,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
) -> GitAnswer:
    """Run ``git ARGS`` in ``repo`` (extra ``env`` over this process's) and return its answer."""
    where = Path(os.path.abspath(repo))
    full = {**os.environ, "GIT_CEILING_DIRECTORIES": str(where.parent), **(env or {})}
    try:
        res = subprocess.run(
            ["git", "-C", str(where), *args],
            input=stdin,
            capture_output=True,
            env=full,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitUnavailable(f"git {' '.join(args[:2])} in {where}: {exc}") from exc
    return GitAnswer(
        res.returncode,
        res.stdout.decode("utf-8", errors="replace").rstrip("\n"),
        res.stderr.decode("utf-8", errors="replace").strip(),
    )
