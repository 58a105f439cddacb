"""Run artifacts are private to the fleet's user (issue 16).

Briefs carry issue text, ``agent.log`` the agent's transcript, the board every comment, the trace
and the cost log the queue's history: on a private repository each is as secret as the repository,
and they were created world-readable (the default umask, 022) for any other local user to read.
Every fleet process that writes them sets the umask to 077 first (files 0600, directories 0700),
and the directories they live in are narrowed when fleet makes or reuses them.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700


def private_umask() -> int:
    """Make everything this process (and its children: the agent) creates private; returns the
    previous umask."""
    return os.umask(PRIVATE_UMASK)


def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) and narrow it to 0700, even if it already existed."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path
