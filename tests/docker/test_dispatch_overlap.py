"""The dispatch side under real overlap, on the four-worker harness: things that happen at once.

- A pusher merges into ``main`` over and over while one sweep dispatches 50 issues: check 9 never
  refuses a clone for a ``main`` that merely moved on during its sync, no issue runs twice, and every
  run's start marker names the run the dispatch launched.
- A cancel of a live run on a worker, with a sweep whose snapshot falls between the runner's
  ``stopped`` and the cancel's ``cancelled`` (forced by the two boards' handshake of
  ``tests/cancel_window.py``): the sweep does not start the issue again.
- One worker's container frozen (``docker pause``: its sshd stops answering, the probe times out)
  while the reaper runs: an orphaned start on a worker that answered is reaped; only the start
  naming the frozen worker waits for it.

Every loop is bounded in count and time; every unit a test starts is stopped when it ends.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.board import open_board
from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.control.cancel import cancel
from fleet.core.exits import Exit
from fleet.core.markers import TERMINAL, Kind, history, render
from fleet.core.model import CIState, Issue
from fleet.core.reap import ReapState
from fleet.inventory import load
from fleet.observe import probe_fleet
from fleet.roles.reaper import reap
from fleet.roles.sweeper import tick
from fleet.testing.harness import HarnessInfo
from tests.cancel_window import Window, cancel_board, dispatch_board

pytestmark = pytest.mark.docker

SWEEP_ISSUES = 50  # the issue's figure
PUSH_GAP_S = 0.05  # a merge every ~0.1 s with the push itself: main moves during every sync
MAX_PUSHES = 3000  # the pusher's bound in count; PUSH_WINDOW_S is its bound in time
PUSH_WINDOW_S = 300.0
RUNS_DEADLINE_S = 600.0  # 50 no-op runs on a busy 2-core box (~1.4 s of worker CPU each)
POLL_S = 2.0


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=pusher", "-c", "user.email=p@p", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


class Pusher:
    """Merges into ``main`` of ``origin`` from a scratch clone until stopped (bounded)."""

    def __init__(self, origin: Path, work: Path) -> None:
        shutil.rmtree(work, ignore_errors=True)
        _git("clone", "-q", str(origin), str(work))
        self.work, self.pushes, self.error = work, 0, ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + PUSH_WINDOW_S
        while not self._stop.is_set() and self.pushes < MAX_PUSHES and time.monotonic() < end:
            try:
                (self.work / "pusher.txt").write_text(f"merge {self.pushes}\n")
                _git("commit", "-q", "-am" if self.pushes else "-m", "a merge", cwd=self.work)
                _git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=self.work)
            except subprocess.CalledProcessError as exc:
                self.error = f"push {self.pushes}: {exc.stderr}"
                return
            self.pushes += 1
            time.sleep(PUSH_GAP_S)

    def __enter__(self) -> Pusher:
        (self.work / "pusher.txt").write_text("first\n")
        _git("add", "pusher.txt", cwd=self.work)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@dataclass
class OverlapFleet:
    info: HarnessInfo
    root: Path
    board: LocalBoard
    ctx: FleetContext


@pytest.fixture(scope="module")
def overlap(
    harness_info: HarnessInfo, harness_deploy: Callable[[str], Path]
) -> Iterator[OverlapFleet]:
    path = harness_deploy("overlap")
    inv = load(path)
    board = open_board(inv)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    _git("config", "core.sharedRepository", "group", cwd=path.parent / "origin.git")
    ctx = FleetContext(inv, board)
    try:
        yield OverlapFleet(harness_info, path.parent, board, ctx)  # type: ignore[arg-type]
    finally:
        ctx.close()


def _terminal(issue: Issue) -> bool:
    return any(m.kind in TERMINAL for m in history(issue, "fleet").markers)


def _wait_all(board: LocalBoard, numbers: list[int]) -> dict[int, Issue]:
    end = time.monotonic() + RUNS_DEADLINE_S
    while True:
        issues = {n: board.issue(n) for n in numbers}
        left = [n for n, i in issues.items() if i is None or not _terminal(i)]
        if not left:
            return issues  # type: ignore[return-value]
        assert time.monotonic() < end, f"no terminal marker after {RUNS_DEADLINE_S}s: {left}"
        time.sleep(POLL_S)


@pytest.mark.timeout(1200)
def test_a_sweep_of_50_while_main_moves_is_never_refused_by_check_9(
    overlap: OverlapFleet, tmp_path: Path
) -> None:
    numbers = [
        overlap.board.create_issue(f"overlap {i}", "nothing to do", labels=["demo:no-op"])
        for i in range(SWEEP_ISSUES)
    ]
    with Pusher(overlap.root / "origin.git", tmp_path / "pusher") as pusher:
        time.sleep(1.0)  # main is moving before the sweep starts
        report = tick(overlap.ctx, apply=True)
        during = pusher.pushes
    assert not pusher.error, pusher.error
    assert during > 0, "the pusher never merged while the sweep ran"
    by_issue = {r.issue: r for r in report.results}
    unsynced = [r.line() for r in report.results if r.code is Exit.CLONE_UNSYNCED]
    assert not unsynced, f"check 9 refused while main moved ({during} merges):\n" + "\n".join(
        unsynced
    )
    refused = [r.line() for r in report.results if not r.launched]
    assert not refused, "\n".join(refused)
    assert sorted(by_issue) == numbers
    issues = _wait_all(overlap.board, numbers)
    for n, issue in issues.items():
        starts = [m for m in history(issue, "fleet").markers if m.kind is Kind.START]
        assert len(starts) == 1, f"#{n}: {len(starts)} start markers (a duplicate run)"
        assert starts[0].get("run") == by_issue[n].run_id, f"#{n}: the start names another run"
        assert starts[0].get("worker") == by_issue[n].worker, f"#{n}: started on another worker"


def _wait_marker(board: LocalBoard, n: int, kind: Kind) -> Issue:
    end = time.monotonic() + RUNS_DEADLINE_S
    while True:
        issue = board.issue(n)
        if issue is not None and any(m.kind is kind for m in history(issue, "fleet").markers):
            return issue
        assert time.monotonic() < end, f"#{n}: no {kind} marker after {RUNS_DEADLINE_S}s"
        time.sleep(POLL_S)


@pytest.mark.timeout(600)
def test_a_sweep_in_the_cancel_window_does_not_start_the_issue_again(
    overlap: OverlapFleet,
) -> None:
    inv = overlap.ctx.inventory
    n = overlap.board.create_issue("cancel window", "hang", labels=["demo:hang"])
    first = tick(overlap.ctx, apply=True)
    [launched] = [r for r in first.results if r.issue == n]
    assert launched.launched, launched.line()
    _wait_marker(overlap.board, n, Kind.START)
    path, origin = inv.board.path, inv.board.origin
    assert path is not None
    w = Window()
    reports: list[object] = []

    def cancelling() -> None:
        with FleetContext(inv, cancel_board(path, origin, w)) as ctx:
            reports.append(cancel(ctx, n, author="ops", reason="wrong spec"))

    t = threading.Thread(target=cancelling)
    t.start()
    try:
        assert w.cancel_in_lock.wait(120), "the cancel never reached its marker"
        with FleetContext(inv, dispatch_board(path, origin, w)) as ctx:
            report = tick(ctx, apply=True)
    finally:
        w.dispatch_read.set()
        t.join(120)
    assert reports and reports[0].code is Exit.OK, reports  # type: ignore[attr-defined]
    assert n in [d.issue for d in report.plan.dispatch]  # the snapshot saw `stopped`, no unit
    [again] = [r for r in report.results if r.issue == n]
    assert (again.check, again.code) == (6, Exit.LATCHED_UNDER_LOCK), again.line()
    issue = overlap.board.issue(n)
    assert issue is not None
    kinds = [m.kind for m in history(issue, "fleet").markers]
    assert kinds == [Kind.START, Kind.STOPPED, Kind.CANCELLED], kinds
    with FleetContext(inv, overlap.board) as ctx:
        live = [
            (v.name, u.name) for v in probe_fleet(ctx) for u in v.units if u.issue == n and u.live
        ]
    assert not live, f"task-{n} live after the cancel: {live}"


def _docker(verb: str, container: str) -> None:
    subprocess.run(["docker", verb, container], check=True, capture_output=True, timeout=120)


@pytest.mark.timeout(600)
def test_a_frozen_worker_blocks_only_the_reaps_of_its_own_starts(overlap: OverlapFleet) -> None:
    inv = overlap.ctx.inventory
    silent = next(c for c in overlap.info.containers if c.name == "w3")
    orphans = {}
    for on in ("w1", "w2", "w3"):  # runs that died on these workers without a close-out
        n = overlap.board.create_issue(f"orphaned on {on}", "died")
        overlap.board.comment(n, render(Kind.START, {"run": f"r-{on}", "worker": on}))
        orphans[on] = n
    skew = timedelta(seconds=inv.policy.reaper_threshold_s + 60)
    _docker("pause", silent.container)
    try:
        with FleetContext(inv, overlap.board, clock=lambda: datetime.now(UTC) + skew) as ctx:
            report = reap(ctx, apply=True)
    finally:
        _docker("unpause", silent.container)
    states = {d.issue: d.state for d in report.decisions}
    assert states[orphans["w1"]] == states[orphans["w2"]] == ReapState.REAP, report.to_json()
    assert states[orphans["w3"]] == ReapState.COULD_NOT_CHECK, report.to_json()
    assert sorted(report.reaped) == sorted([orphans["w1"], orphans["w2"]])
    assert any(u.startswith("w3") for u in report.unchecked), report.unchecked
    for on, n in orphans.items():
        issue = overlap.board.issue(n)
        assert issue is not None
        want = [Kind.START] if on == "w3" else [Kind.START, Kind.REAPED]
        assert [m.kind for m in history(issue, "fleet").markers] == want, on
