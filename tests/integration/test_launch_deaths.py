"""Deaths before the start marker are bounded (D13's attempt cap): real sweeps, real units, real runners.

Every launch here dies at run step 1 — the worker's runner clone names a remote that does not exist,
so the runner refuses to run stale code and exits 70 before it can post anything. Nothing on the
board says it ran; the runner's own record on its worker (``launch-deaths.jsonl``) is what the next
sweep counts. Past the attempt cap the sweeper stops launching it, ``fleet-status`` names the state
``dead-on-launch`` with its remedy, and a ``fleet:release`` comment gives it a fresh count.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.core.exits import RunExit
from fleet.core.model import WaitState
from fleet.core.select import select
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.runner.prestart import deaths_path
from fleet.views.status import as_json
from tests.integration.fleet_fixture import (
    POLL_S,
    RUN_DEADLINE_S,
    fleet_at,
    markers,
    wait_for_unit_result,
    worker,
)

pytestmark = pytest.mark.timeout(240)


def _launch_once(f, n: int) -> bool:  # type: ignore[no-untyped-def]
    """One sweep; when it launched ``n``, wait for that unit to end. True when it launched."""
    result = Path(worker(f).state_dir) / "units" / f"task-{n}.result.json"
    result.unlink(missing_ok=True)
    end = time.monotonic() + RUN_DEADLINE_S
    while True:
        report = tick(f.ctx, apply=True)
        launched = [r for r in report.results if r.issue == n and r.launched]
        refused = [r for r in report.results if r.issue == n and not r.launched]
        # A finished unit still unloading (check 10, held-finished) clears in a moment: sweep again.
        if not refused or time.monotonic() > end:
            break
        time.sleep(POLL_S)
    if not launched:
        return False
    done = wait_for_unit_result(f, n)
    assert done["exit_code"] == RunExit.STALE, done
    return True


@pytest.mark.slow
def test_launches_that_die_before_the_start_marker_stop_at_the_cap(tmp_path: Path) -> None:
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    extra = {"runner_clone": str(clone), "runner_remote": str(tmp_path / "no-such-remote.git")}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        cap = f.inventory.policy.attempt_cap
        launches = 0
        for _ in range(cap + 2):  # bounded: two sweeps more than the cap allows
            if not _launch_once(f, n):
                break
            launches += 1
        assert launches == cap, f"{launches} launches; the cap is {cap}"
        assert markers(f, n) == []  # nothing reached the board: the worker's record counted them
        lines = deaths_path(worker(f).state_dir).read_text(encoding="utf-8").splitlines()
        assert len(lines) == cap and all('"exit": 70' in ln for ln in lines)

        snap = snapshot(f.ctx)
        plan = select(snap)
        waiting = plan.reason_for(n)
        assert waiting is not None and waiting.state == WaitState.DEAD_ON_LAUNCH, waiting
        row = next(r for r in as_json(snap, plan, None)["items"] if r["issue"] == n)
        assert row["state"] == WaitState.DEAD_ON_LAUNCH
        assert "stale runner clone" in row["reason"] and "fleet:release" in row["reason"]

        # A human who fixed the cause releases it: the count starts again from the release.
        f.board.comment(n, "fleet:release\nremote fixed", author="a-human")
        assert _launch_once(f, n), "a release gives the item a fresh launch count"
