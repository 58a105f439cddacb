"""The demo's fleet is the embedded default's: after `invoke demo`, `fleet-status`, `timeline`,
`board.list` and `schedule` without a flag read the board, state and workers the demo drained."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.board.local import LocalBoard
from fleet.demo import DEMO_BODY, DemoRefused, fresh, write_inventory
from fleet.inventory import load

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "inventory.yaml"

# What the demo may change: two bounds on runs in flight, and the interpreter that imports this
# checkout (its `python:` and the agent's interpreter). Anything else differing would make the follow-on commands show another fleet.
DEPARTURES = {"retry_backoffs_s", "max_run_s"}


def _shape(inv, root: Path):
    def rel(p) -> str:
        return str(Path(p).relative_to(root))

    workers = [
        (
            w.name,
            w.transport,
            w.lane,
            rel(w.clone),
            rel(w.state_dir),
            w.supervisor,
            w.master,
            w.path_prefix,
            w.agent.split()[-2:],
        )
        for w in inv.workers
    ]
    places = (
        rel(inv.board.path),
        rel(inv.board.origin),
        rel(inv.lock.path),
        rel(inv.halt.file),
        rel(inv.state_dir),
        inv.board.identity,
        inv.halt.issue_title,
    )
    policy = {k: v for k, v in vars(inv.policy).items() if k not in DEPARTURES}
    return places, workers, policy


def test_the_demo_inventory_names_the_committed_defaults_fleet(tmp_path):
    root = tmp_path / ".fleet" / "demo"
    root.mkdir(parents=True)
    demo = load(write_inventory(root))
    committed = load(COMMITTED)
    assert _shape(demo, root) == _shape(committed, REPO / ".fleet" / "demo")
    assert demo.policy.retry_backoffs_s != committed.policy.retry_backoffs_s  # the departure


def test_a_fresh_demo_keeps_a_board_that_holds_someone_elses_issues(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    board = LocalBoard.create(root / "board.sqlite3", root / "origin.git")
    board.create_issue("sample", f"{DEMO_BODY}plain).")
    board.create_issue("my real work", "not the demo's")
    board.disconnect()
    with pytest.raises(DemoRefused, match="#2"):
        fresh(root)
    assert (root / "board.sqlite3").exists()


def test_a_fresh_demo_removes_its_own_last_run(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    board = LocalBoard.create(root / "board.sqlite3", root / "origin.git")
    board.create_issue("sample", f"{DEMO_BODY}plain).")
    board.disconnect()
    fresh(root)
    assert not root.exists()
