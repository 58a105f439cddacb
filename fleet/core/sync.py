"""Clone sync on a worker (pre-flight check 9, run step 1): shell builders and parsers, pure.

Verify the outcome, never the exit code (D11): a fetch can exit 0 against a stale remote ref, so the
script asks the remote what ``main`` is *before* fetching, and the fetched ref must equal that answer
or descend from it (``main`` moving on during the fetch is fresh, not stale). It prints one token:
``fleet-sync:ok <sha>``, ``fleet-sync:stashed <sha>`` (a dirty tree was stashed, never discarded,
then synced), ``fleet-sync:foreign-origin <url>`` (the clone's origin is not the inventory's:
:mod:`fleet.core.origin`) or ``fleet-sync:failed <why>``. The script always exits 0; no token means
nothing ran. Every value that reaches the script is ``shlex.quote``d, the clone path included.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from enum import StrEnum

from fleet.core.origin import AcceptedOrigins, remote_origins

TOKEN = "fleet-sync:"
# A fetch of a large repository is the longest thing a holder does under the clone lock.
CLONE_LOCK_WAIT_S = 120


def clone_lock_path(clone: str) -> str:
    """The lock beside a clone that serialises every sync and worktree creation on it."""
    return clone.rstrip("/") + ".lock"


class SyncState(StrEnum):
    OK = "ok"
    STASHED = "stashed"
    FAILED = "failed"
    FOREIGN_ORIGIN = "foreign-origin"  # origin resolves to a remote the inventory does not name
    NOTHING_RAN = "nothing-ran"


@dataclass(frozen=True)
class SyncResult:
    state: SyncState
    detail: str

    @property
    def synced(self) -> bool:
        return self.state in (SyncState.OK, SyncState.STASHED)


def origin_check(accept: AcceptedOrigins) -> str:
    """The script's check that ``origin`` (fetch and push URL) resolves to an accepted remote.

    ``case`` with quoted patterns compares literally; ``exact`` byte for byte, ``folded`` after
    lowering. Empty when nothing is known to compare against.
    """
    if not accept.known:
        return ""
    exact = "|".join(shlex.quote(u) for u in accept.exact) or "''"
    folded = "|".join(shlex.quote(u.lower()) for u in accept.folded)
    # Lowering takes a tr process per URL, so only a check with folded spellings lowers; without
    # one, the empty pattern the lowered match had is kept: an origin git names no URL for (as when
    # only exact or only folded spellings are known) is left to the fetch, which fails on it.
    lowered = (
        "l=$(printf '%s' \"$u\" | tr '[:upper:]' '[:lower:]'); "
        f'case "$l" in {folded}) ok=1;; esac; '
        if folded
        else "case \"$u\" in '') ok=1;; esac; "
    )
    return (
        'for u in "$(git remote get-url origin 2>/dev/null)" '
        "\"$(git remote get-url --push origin 2>/dev/null)\"; do ok=''; "
        f'case "$u" in {exact}) ok=1;; esac; '
        + lowered
        + f'if [ -z "$ok" ]; then echo "{TOKEN}foreign-origin ${{u:-none}}"; exit 0; fi; done; '
    )


# A ``git worktree add`` killed midway (SIGKILL: git's own signal handler cleans up after a
# SIGTERM) leaves its admin entry locked with git's reason "initializing", sometimes with the
# placeholder all-zero HEAD git writes first — and then every fetch in the clone fails ("bad object
# worktrees/<name>/HEAD"), while ``git worktree prune`` skips locked entries. Only under the clone
# lock (no add of ours can be running) is such an entry known to be dead: it is removed, then
# pruned, and the sync says so on stderr. ``$gc`` is the clone's common git directory; a clone that
# never had a worktree (a runner clone) has nothing to prune and starts no git for it.
PRUNE_INTERRUPTED = (
    'if [ -n "$fleet_locked" ] && [ -d "$gc/worktrees" ]; then for l in "$gc"/worktrees/*/locked; '
    'do [ -f "$l" ] && [ "$(cat -- "$l")" = initializing ] || continue; '
    'echo "fleet-sync: removing an interrupted worktree add: ${l%/locked}" >&2; '
    'rm -rf -- "${l%/locked}"; done; git worktree prune >/dev/null 2>&1; fi; '
)


def _clone_lock_script(clone: str) -> str:
    """The script's hold of the clone lock (``fleet_locked`` set once held), or a warning."""
    lock = shlex.quote(clone_lock_path(clone))
    # One sync of a clone at a time: two dispatchers (or a dispatcher and a starting run) that
    # clone or stash the same checkout at once break each other. No flock: proceed, and say so (D5).
    # The braces keep ``2>/dev/null`` to the exec: on exec itself it would silence every warning.
    # The lock's directory by parameter expansion, made only when missing: no dirname or mkdir
    # process for a sync of a clone that exists (every sync but the first).
    return (
        f'fleet_locked=\'\'; d={lock}; case "$d" in */*) d="${{d%/*}}";; *) d=.;; esac; '
        '[ -d "${d:-/}" ] || mkdir -p -- "${d:-/}" 2>/dev/null; '
        f"{{ exec 9>>{lock}; }} 2>/dev/null; "
        f"if command -v flock >/dev/null 2>&1; then flock -w {CLONE_LOCK_WAIT_S} 9 && fleet_locked=1 || "
        f"echo 'fleet-sync: warning: clone lock '{lock}' not taken; syncing anyway' >&2; "
        "else echo 'fleet-sync: warning: no flock here; syncing without the clone lock' >&2; fi; "
    )


def _checkout_script(branch: str) -> str:
    """The script's fetch of ``origin/<branch>``, verified against the remote's own answer, and
    the detached checkout of it; it prints the token (``stashed`` when the tree was stashed).

    A clone already detached at the fetched ref with a clean tree is left as it is: no checkout,
    so a sync that changes nothing writes neither ``HEAD`` nor the index. A runner reads their
    times to know whether the clone moved after it started (``fleet.runner.__main__``), and a
    checkout rewrites the index even when nothing changes."""
    fail = f"echo {TOKEN}failed"
    return (
        f"b={shlex.quote(branch)}; "
        # The remote's answer first, then the fetch: a fetched ref equal to it or descending from
        # it is fresh (main moved on while we fetched, the common case under merges); only one
        # that is behind or beside it is stale (a fetch that exited 0 and moved nothing, or a
        # main rewound by a force-push in between). The answer's first field is cut by the shell.
        'want=$(git ls-remote origin "refs/heads/$b" 2>/dev/null); want=${want%%[!0-9a-f]*}; '
        f'[ -n "$want" ] || {{ {fail} "remote has no $b (ls-remote failed)"; exit 0; }}; '
        f"git fetch -q origin >/dev/null 2>&1 || {{ {fail} 'fetch failed'; exit 0; }}; "
        # One rev-parse: the fetched ref, HEAD's commit, and HEAD's name ("HEAD" when detached);
        # when HEAD does not resolve (a clone of an origin whose HEAD names no branch), the ref.
        'if at=$(git rev-parse "origin/$b^{commit}" HEAD --symbolic-full-name HEAD 2>/dev/null); '
        'then set -- $at; else set -- "$(git rev-parse -q --verify "origin/$b^{commit}" '
        '2>/dev/null)"; fi; have=${1:-}; '
        'if [ "$want" != "$have" ] && ! git merge-base --is-ancestor "$want" "$have" '
        "2>/dev/null; then "
        f'{fail} "stale: origin/$b is ${{have:-none}}, behind the remote answer $want"; exit 0; fi; '
        'if [ "${2:-}" != "$have" ] || [ "${3:-}" != HEAD ]; then '
        'git checkout -q --detach "origin/$b" >/dev/null 2>&1 || '
        f'{{ {fail} "checkout of origin/$b failed"; exit 0; }}; fi; '
        f'if [ -n "$stashed" ]; then echo "{TOKEN}stashed $have"; else echo "{TOKEN}ok $have"; fi; '
    )


def sync_command(
    clone: str,
    *,
    origin: str | None,
    branch: str = "main",
    note: str = "",
    accept: AcceptedOrigins | None = None,
) -> str:
    """Make ``clone`` exist and sit detached at a verified-fresh ``origin/<branch>``.

    ``origin`` is used to create a missing clone. ``accept`` names the remotes the clone's origin
    may resolve to (default: ``origin`` itself); a clone pointing elsewhere is refused before
    anything is fetched. A dirty tree is stashed with a message that names the run about to start
    (D10: the pre-flight that ran ``reset --hard`` inside a live tree destroyed five edits; ours
    never discards).
    """
    accept = remote_origins(origin) if accept is None else accept
    c = shlex.quote(clone)
    msg = shlex.quote(f"fleet: stashed before {note}".strip())
    fail = f"echo {TOKEN}failed"
    create = (
        f"{fail} 'clone missing and no origin to clone from'; exit 0"
        if not origin
        else f"git clone -q -- {shlex.quote(origin)} {c} >/dev/null 2>&1 || "
        f"{{ {fail} 'git clone failed'; exit 0; }}"
    )
    return (
        "( "
        + _clone_lock_script(clone)
        # The common git directory (relative to the clone) answers "is it a clone" too.
        + f"gc=$(git -C {c} rev-parse --git-common-dir 2>/dev/null) || {{ {create}; gc=.git; }}; "
        f"cd {c} || {{ {fail} 'cannot enter clone'; exit 0; }}; "
        + origin_check(accept)
        + PRUNE_INTERRUPTED
        + "stashed=''; "
        # No optional locks: status compares the tree and never rewrites the index.
        'if [ -n "$(git --no-optional-locks status --porcelain 2>/dev/null)" ]; then '
        f"git stash push -u -q -m {msg} >/dev/null 2>&1 && stashed=1 || "
        f"{{ {fail} 'dirty tree could not be stashed'; exit 0; }}; fi; "
        + _checkout_script(branch)
        + "exit 0 ); exit 0"
    )


def parse_sync(stdout: str | None) -> SyncResult:
    if stdout is None:
        return SyncResult(SyncState.NOTHING_RAN, "the transport could not run the sync")
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith(TOKEN):
            continue
        word, _, rest = line[len(TOKEN) :].partition(" ")
        try:
            return SyncResult(SyncState(word), rest.strip())
        except ValueError:
            continue
    return SyncResult(SyncState.NOTHING_RAN, "no fleet-sync token in the output: nothing ran")
