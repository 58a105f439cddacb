"""Four agent kinds at once on the four-worker harness: each worker speaks another CLI.

The harness's five workers (w4 has two masters) run the stand-in agent as ``claude``, ``codex``,
``gemini``, ``plain`` and ``claude`` again (``--kind``), the adapter detected from each command. One sweep launches a run on every worker at the same
time over SSH under systemd; each run is read by its own worker's adapter, ends ``success`` on a
merged PR, names its kind in its start marker, and no worker is darkened.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.core.markers import TERMINAL, Kind, history
from fleet.core.model import CIState
from fleet.core.select import select
from fleet.inventory import load
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.testing import harness

pytestmark = pytest.mark.timeout(600)

KINDS = ("claude", "codex", "gemini", "plain")


def _closed_out(board: LocalBoard, n: int, identity: str) -> bool:
    issue = board.issue(n)
    if issue is None or issue.is_open:
        return False
    last = history(issue, identity).last_marker
    return last is not None and last.kind in TERMINAL


DEADLINE_S = 300  # four demo runs over SSH (runner sync, re-exec, worktree, git): about a minute
POLL_S = 2.0


def _kinds_inventory(path: Path) -> dict[str, str]:
    """Give each worker its own kind; returns worker name -> kind."""
    yaml = YAML()
    data = yaml.load(path.read_text())
    given = {}
    for i, w in enumerate(data["workers"]):
        kind = KINDS[i % len(KINDS)]
        w["agent"] = f"python -m fleet.agents.demo --kind {kind}"
        given[w["name"]] = kind
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        yaml.dump(data, f)
    tmp.replace(path)
    harness.grant_shared(path)
    return given


def test_every_worker_speaks_another_kind_and_all_four_runs_succeed_at_once(
    harness_info: harness.HarnessInfo, harness_deploy
) -> None:
    path = harness_deploy("kinds")
    root = path.parent
    given = _kinds_inventory(path)
    inv = load(path)
    assert {w.name: w.agent_kind.value for w in inv.workers} == given and not inv.warnings
    board = LocalBoard(root / "board.sqlite3", root / "origin.git")
    board.set_ci(CIState.GREEN)
    subprocess.run(
        ["git", "config", "core.sharedRepository", "group"], cwd=root / "origin.git", check=True
    )
    harness.grant_shared(root)
    # a lane may name the worker itself (predicate 2): one issue per worker, each on its own
    issues = {board.create_issue(f"Note for {k} on {w}", lane=w): w for w, k in given.items()}
    ctx = FleetContext(inv, board)
    try:
        report = tick(ctx, apply=True)
        launched = {r.issue: r.worker for r in report.results if r.launched}
        assert launched == issues, [r.line() for r in report.results]
        end = time.monotonic() + DEADLINE_S
        # Closed by its merged PR, then the run's close-out posts the terminal marker: wait for
        # both, or a run that merged but has not closed out yet reads as unfinished.
        while not all(_closed_out(board, n, inv.policy.identity) for n in issues):
            assert time.monotonic() < end, "not every run merged and closed out in time"
            time.sleep(POLL_S)
        for n, w in issues.items():
            issue = board.issue(n)
            assert issue is not None
            h = history(issue, inv.policy.identity)
            start = h.last_of(Kind.START)
            assert start is not None and start.get("agent") == given[w]
            assert h.last_marker is not None and h.last_marker.kind is Kind.SUCCESS, issue.comments
        snap = snapshot(ctx)
        assert not [v.name for v in snap.workers if v.dark]
        assert not select(snap).dispatch
    finally:
        ctx.close()
