"""Which remote a worker's clone may fetch from: the inventory's, never one written into the clone.

The shared clone's ``.git/config`` is writable by every agent that runs on the worker (worktrees
share it), so an agent — or a prompt injected into one — can point ``origin`` (or a
``url.<base>.insteadOf`` rewrite, or a ``pushurl``) at a remote it picked, and every later run would
start from that remote's ``main`` and push there. The sync therefore compares what git resolves for
``origin`` (``git remote get-url``, which applies ``insteadOf`` rewrites; fetch and push URL both)
with what the inventory names, and refuses a clone whose origin is foreign (check 9, exit 34).

Pure: the accepted spellings are values, matched by the shell script :mod:`fleet.core.sync` builds and by
:func:`origin_accepted` here, for the runner's own re-check at step 5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # a type only: the pure core does not load the inventory module
    from fleet.inventory import BoardConfig


@dataclass(frozen=True)
class AcceptedOrigins:
    """The URLs a clone's ``origin`` may resolve to.

    ``exact`` is compared byte for byte (a local path: ``/srv/Origin.git`` is another repository
    than ``/srv/origin.git``); ``folded`` is compared case-insensitively (GitHub resolves
    ``Owner/Repo`` and ``owner/repo`` to one repository). Both empty means nothing is known to
    compare against, and the check is skipped (the caller says so).
    """

    exact: tuple[str, ...] = ()
    folded: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return bool(self.exact or self.folded)

    def describe(self) -> str:
        return " or ".join((*self.exact, *self.folded)) or "(none configured)"


def github_host(api_url: str) -> str:
    """The git host of a GitHub API: ``api.github.com`` serves ``github.com``; a GitHub Enterprise
    Server's API lives under ``https://<host>/api/v3`` on the git host itself."""
    host = (urlsplit(api_url).hostname or "").lower()
    return "github.com" if host == "api.github.com" else host


def github_urls(host: str, owner: str, repo: str) -> tuple[str, ...]:
    """Every spelling git accepts for one GitHub repository: https, scp-like ssh and ssh://."""
    path = f"{owner}/{repo}".lower()
    host = host.lower()
    out: list[str] = []
    for suffix in ("", ".git"):
        out += [
            f"https://{host}/{path}{suffix}",
            f"git@{host}:{path}{suffix}",
            f"ssh://git@{host}/{path}{suffix}",
        ]
    return tuple(out)


def target_origins(board: BoardConfig) -> AcceptedOrigins:
    """The accepted origins of a worker's clone of the TARGET repository."""
    if board.kind == "local":
        return AcceptedOrigins(exact=(str(board.origin),) if board.origin else ())
    gh = board.github
    if gh is None:
        return AcceptedOrigins()
    return AcceptedOrigins(folded=github_urls(github_host(gh.api_url), gh.owner, gh.repo))


def remote_origins(remote: str | None) -> AcceptedOrigins:
    """The accepted origin of a clone synced from one named remote (the runner's clone, D11)."""
    return AcceptedOrigins(exact=(remote,) if remote else ())


def origin_accepted(url: str, accepted: AcceptedOrigins) -> bool:
    url = url.strip()
    return url in accepted.exact or url.lower() in accepted.folded


def foreign(urls: Sequence[str], accepted: AcceptedOrigins) -> str | None:
    """The first of ``urls`` (fetch, push) that is not accepted, or None when all are."""
    return next((u for u in urls if not origin_accepted(u, accepted)), None)
