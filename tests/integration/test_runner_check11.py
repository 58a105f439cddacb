"""Check 11 fails OPEN (seed 003): a board the runner cannot read at step 3 does not stop the run.

The board is made unreadable for real: a table the issue read needs (``assignees``) is renamed
inside the SQLite file, while the tables a comment writes stay — so the read fails the way a
half-migrated or damaged board fails, and the start marker can still be posted.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleet.board.base import Board, BoardUnreadable
from fleet.core.exits import RunExit
from fleet.core.markers import Kind
from fleet.core.model import Issue
from fleet.runner.run import Runner
from tests.integration.fleet_fixture import fleet_at, markers, run_runner, worker

pytestmark = pytest.mark.timeout(120)


def _rename(board_file: Path, old: str, new: str) -> None:
    conn = sqlite3.connect(board_file)
    try:
        conn.execute(f"ALTER TABLE {old} RENAME TO {new}")
        conn.commit()
    finally:
        conn.close()


def test_an_unreadable_board_at_step_3_proceeds_and_says_so(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        board_file = f.root / "board.sqlite3"
        _rename(board_file, "assignees", "assignees_gone")
        done = run_runner(f, n, "r-unreadable")
        _rename(board_file, "assignees_gone", "assignees")
        # Not 74 (a crash, no marker): it went on to post its start, and closed out by name.
        assert done.returncode == RunExit.FAILED, (done.returncode, done.stderr)
        assert "check 11 could not read the issue" in done.stderr
        assert "proceeding: check 11 fails open" in done.stderr
        assert markers(f, n) == [Kind.START, Kind.FAILED]
        last = f.board.issue(n)
        assert last is not None and "issue unreadable for the brief" in last.comments[-1].body


@dataclass
class FirstReadFails:
    """The real board's ``issue()`` with its first read failing: a blink at exactly step 3. It is
    patched onto the board object itself, so the runner still sees the embedded board it is (and
    serves the agent its forge gate)."""

    board: Board
    failed: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._read = self.board.issue

    def issue(self, number: int) -> Issue | None:
        if not self.failed:
            self.failed.append(number)
            raise BoardUnreadable("board blinked at step 3")
        return self._read(number)


def test_a_board_blink_at_step_3_still_runs_the_work_to_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        blinking = FirstReadFails(f.board)
        monkeypatch.setattr(f.board, "issue", blinking.issue)
        runner = Runner(f.inventory, f.board, worker(f), n, "r-blink")
        code = runner.run()
        err = capsys.readouterr().err
        assert blinking.failed == [n]
        assert code == RunExit.OK, err
        assert "check 11 fails open" in err
        assert markers(f, n) == [Kind.START, Kind.SUCCESS]
