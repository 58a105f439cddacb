"""Seed 000's three failure classes acting in the sweeper's real tick, on a real board and a real
local worker: a retry-class refusal is dispatched again within the tick and launches; a failure
no table classifies is told to a human through the announcer — one report, however many ticks."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.lock import FleetLock
from fleet.roles import engine
from fleet.roles.sweeper import tick
from fleet.trace import read_trace
from tests.integration.fleet_fixture import (
    Fleet,
    has_marker,
    make_fleet,
    set_worker,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

WATCH_S = 30.0  # bounds the wait for the first lock timeout to land in the trace


def _fleet(root: Path, *, lock_wait_s: float = 30, python: str | None = None) -> Fleet:
    edit = None if python is None else set_worker("w1", python=python)
    return make_fleet(root, ("w1",), lock_wait_s=lock_wait_s, edit=edit)


def _events(f: Fleet) -> list[dict[str, object]]:
    trace = Path(f.inventory.state_dir) / "trace.jsonl"
    return read_trace(trace) if trace.exists() else []


@pytest.mark.slow
def test_a_retry_class_refusal_is_dispatched_again_and_launches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another dispatcher holds the fleet lock past lock.wait_s (44, retry class); it lets go once
    the first attempt has landed; the engine's next rung launches the issue in the same tick."""
    monkeypatch.setattr(engine, "RETRY_BACKOFFS_S", (1.0, 3.0))
    f = _fleet(tmp_path, lock_wait_s=0.3)
    with f.ctx:
        n = f.board.create_issue("Add a greeting")
        other = FleetLock(Path(f.inventory.lock.path), wait_s=1)
        other.__enter__()

        def let_go_after_the_first_refusal() -> None:
            end = time.monotonic() + WATCH_S
            while time.monotonic() < end:
                if any(e["event"] == "LAND" and not e["ok"] for e in _events(f)):
                    break
                time.sleep(0.05)
            other.__exit__(None, None, None)

        watcher = threading.Thread(target=let_go_after_the_first_refusal)
        watcher.start()
        try:
            report = tick(f.ctx, apply=True)
        finally:
            watcher.join()
        assert [(r.issue, r.outcome) for r in report.results] == [(n, "launched")]
        assert report.retried == 1 and report.counts()["retried"] == 1
        lands = [e for e in _events(f) if e["event"] == "LAND" and e["item"] == str(n)]
        assert [(e["ok"], e["failure"]) for e in lands] == [(False, "retry"), (True, None)]
        assert "LOCK_TIMEOUT" in str(lands[0]["detail"])
        retry = [e for e in _events(f) if e["event"] == "RETRY"]
        assert [(e["item"], e["after_s"]) for e in retry] == [(str(n), 1.0)]
        wait_for(f.board, n, has_marker(Kind.SUCCESS))


def _python_whose_supervisor_will_not_start(tmp_path: Path) -> str:
    """The worker's python answers every probe (checks 8 and 4, the unit probe) but its supervisor
    dies on import, whether started by the worker's ``start`` or directly (a local claim) — a
    half-installed fleet: exit 43, SUPERVISOR_FAILED, which no table of the sweeper classifies."""
    wrapper = tmp_path / "python-broken-start"
    wrapper.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -m fleet.units start "* | *" -m fleet.units.supervise "*)\n'
        "  echo \"ModuleNotFoundError: No module named 'fleet.units.start'\" >&2; exit 1;;\n"
        "esac\n"
        f'exec {sys.executable} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(wrapper)


def test_a_failure_nobody_can_classify_is_told_to_a_human_once(tmp_path: Path) -> None:
    f = _fleet(tmp_path, python=_python_whose_supervisor_will_not_start(tmp_path))
    with f.ctx:
        n = f.board.create_issue("Add a greeting")
        label = f.inventory.policy.report_label
        for sweep in (1, 2):
            report = tick(f.ctx, apply=True)
            assert [(r.issue, r.code) for r in report.results] == [(n, Exit.SUPERVISOR_FAILED)]
            assert report.unclassified == [n] and report.retried == 0
            reports = [i for i in f.board.list_issues() if label in i.labels]  # type: ignore[attr-defined]
            assert len(reports) == 1, f"sweep {sweep}: {[r.title for r in reports]}"
        (rep,) = reports
        assert rep.title == f"fleet: sweeper could not classify a failure on #{n}"
        assert "SUPERVISOR_FAILED" in rep.body and "cannot-classify" in rep.body
        assert rep.is_open and rep.status is None  # never queued: a report is not work
        told = [e for e in _events(f) if e["event"] == "ANNOUNCE-UNCLASSIFIED"]
        assert [e["ok"] for e in told] == [True, True]
        assert "already open" in str(told[1]["detail"])
        assert os.path.exists(f.inventory.state_dir)
