"""Eight processes write one board at once and nothing is lost.

The board is the queue (D1) and every marker is a write to it (D6): the sweeper, a human's dispatch
and every runner write the same file concurrently. Each writer here is a real process (spawn: no
inherited connection), all released together by a barrier onto the same three issues.
"""

from __future__ import annotations

import itertools
import multiprocessing
from pathlib import Path

import pytest

from fleet.board.local import LocalBoard

PROCESSES = 8
COMMENTS = 50  # per process
ISSUES = 3
# Bounds each join and the barrier: the whole test took ~5 s here, most of it spawn start-up.
DEADLINE_S = 90


def _body(proc: int, k: int) -> str:
    # Half the comments look like markers (a glyph + "fleet:<kind>" first line); the board must
    # store them verbatim like any other text.
    first = f"▶ fleet:start run=p{proc}-{k}" if k % 2 == 0 else f"note p{proc}-{k}"
    return f"{first}\nfree text from process {proc}, comment {k}"


def _writer(path: str, issues: list[int], proc: int, barrier: object) -> None:
    board = LocalBoard(Path(path), None)
    barrier.wait(DEADLINE_S)  # type: ignore[attr-defined]
    for k in range(COMMENTS):
        number = issues[k % ISSUES]
        board.comment(number, _body(proc, k), author=f"worker-{proc}")
        if k % 10 == 0:
            board.add_labels(number, [f"p{proc}"])
    board.disconnect()


@pytest.mark.timeout(DEADLINE_S + 30)
@pytest.mark.slow
def test_eight_processes_lose_no_comment_and_keep_time_order(tmp_path: Path) -> None:
    board = LocalBoard.create(tmp_path / "board.db", None)
    issues = [board.create_issue(f"shared {k}") for k in range(ISSUES)]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    procs = [
        ctx.Process(target=_writer, args=(str(board.path), issues, p, barrier))
        for p in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(DEADLINE_S)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    comments = sorted((c for i in board.list_issues() for c in i.comments), key=lambda c: c.id)
    expected = {_body(p, k) for p in range(PROCESSES) for k in range(COMMENTS)}
    bodies = [c.body for c in comments]
    assert len(bodies) == PROCESSES * COMMENTS
    assert set(bodies) == expected  # every one present, and (by the count) exactly once
    times = [c.created_at for c in comments]
    assert all(a < b for a, b in itertools.pairwise(times))
    for index, issue in enumerate(board.list_issues()):
        assert sorted(issue.labels) == sorted(f"p{p}" for p in range(PROCESSES))
        on_this = {_body(p, k) for p in range(PROCESSES) for k in range(index, COMMENTS, ISSUES)}
        assert {c.body for c in issue.comments} == on_this
