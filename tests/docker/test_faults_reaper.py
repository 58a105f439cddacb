"""Faults on the four-worker harness, part two: what the reaper and the repairer are for.

- **Worker loss.** ``docker kill`` a worker while its run is live: the run's start marker has no
  terminal and never will. While the worker is down its probe is could-not-check, so nothing reaps
  the item and nothing re-dispatches it (D20: silence is not absence). Once it is back — a new port,
  its transient units gone — the reaper resets the item and the next sweep completes it. No success
  marker appears anywhere without a merged PR behind it.
- **SIGKILL of the runner.** A signal that cannot be caught leaves no close-out (D12's premise);
  the reaper handles it.
- **Duplicate repair.** Two (here three) live units for one issue under different masters and
  containers, launched by calling each master's ``Supervisor.start`` directly — the hand path
  outside the lock that D4's history is about. ``repair(apply=True)`` keeps the oldest and stops the
  others, each with a ``superseded`` marker naming the kept one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet.core.markers import Kind, history
from fleet.core.model import Issue, WaitState
from fleet.core.reap import ReapState
from fleet.core.repair import who
from fleet.core.select import select
from fleet.dispatch import dispatch, runner_argv
from fleet.observe import probe_worker, snapshot
from fleet.roles.reaper import reap
from fleet.roles.repairer import repair
from fleet.roles.sweeper import tick
from fleet.testing.harness import HarnessInfo
from tests.docker.faults_support import (
    REAPER_THRESHOLD_S,
    FaultFleet,
    Leftovers,
    docker,
    fault_fleet,
    file_issue,
    kinds,
    leftovers,
    merged_prs,
    wait_until,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

# After a runner is gone, how long a late close-out would have had to show up (it posts within a
# second of the signal when it can): the wait that makes "no close-out" mean something.
SETTLE_S = 5.0


@pytest.fixture
def ff(harness_info: HarnessInfo, harness_deploy: Callable[[str], Path]) -> FaultFleet:
    return fault_fleet(harness_info, harness_deploy)


@pytest.fixture
def left(ff: FaultFleet) -> Iterator[Leftovers]:
    yield from leftovers(ff)


def _older_than_threshold(ff: FaultFleet, n: int) -> None:
    """Wait until the start is past the reaper threshold, so only the probe can stop a reap."""
    start = history(ff.issue(n), "fleet").last_of(Kind.START)
    assert start is not None
    wait_until(
        f"#{n}'s start to pass the reaper threshold",
        lambda: (time.time() - start.at.timestamp()) > REAPER_THRESHOLD_S + 1,
        REAPER_THRESHOLD_S + 60,
    )


def _no_false_success(ff: FaultFleet) -> None:
    """Every success marker on the board has a merged PR closing its issue behind it (D2)."""
    for issue in ff.board.list_issues():
        if Kind.SUCCESS in kinds(issue):
            assert merged_prs(ff, issue.number), f"#{issue.number}: success without a merged PR"


def _completes_after_reap(ff: FaultFleet, left: Leftovers, n: int) -> Issue:
    """The reaped item is eligible again: one sweep launches it, and it finishes for real."""
    with ff.context() as ctx:
        report = tick(ctx, apply=True)
    launched = [r for r in report.results if r.launched]
    assert [r.issue for r in launched] == [n], [r.line() for r in report.results]
    assert launched[0].worker is not None
    left.units.append((launched[0].worker, n))
    return ff.wait_last(n, Kind.SUCCESS)


def test_a_killed_worker_is_not_reaped_until_it_is_back_then_the_item_completes(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w1"
    container = ff.container(w)
    n = file_issue(ff, left, "Fault: worker loss mid-run", labels=["demo:hang", "demo:once"])
    with ff.context() as ctx:
        r = dispatch(ctx, n, worker=w)
    assert r.launched, r.line()
    left.units.append((w, n))
    ff.wait_marker(n, Kind.START)
    assert ff.live_units(w, n)

    docker("kill", container)
    try:
        _older_than_threshold(ff, n)
        with ff.context() as ctx:
            report = reap(ctx, apply=True)
            plan = select(snapshot(ctx))
        # Could-not-check, not "no unit": the item keeps its start, and stays latched.
        assert report.reaped == [], report.to_json()
        decision = next(d for d in report.decisions if d.issue == n)
        assert (decision.reap, decision.state) == (False, ReapState.COULD_NOT_CHECK), decision.why
        assert any(u.startswith(f"{w} (unreachable") for u in report.unchecked), report.unchecked
        assert kinds(ff.issue(n)) == [Kind.START]
        waiting = plan.reason_for(n)
        assert waiting is not None and waiting.state == WaitState.LATCHED, waiting
    finally:
        docker("start", container)
        ff.refresh()  # a new port, a new known_hosts, the inventory rewritten

    # Back, and its transient units are gone with the old boot: the run is an orphan now.
    assert not ff.live_units(w, n)
    with ff.context() as ctx:
        report = reap(ctx, apply=True)
    assert report.reaped == [n], report.to_json()
    assert next(d for d in report.decisions if d.issue == n).state == ReapState.REAP
    assert kinds(ff.issue(n)) == [Kind.START, Kind.REAPED]

    done = _completes_after_reap(ff, left, n)
    assert kinds(done) == [Kind.START, Kind.REAPED, Kind.START, Kind.SUCCESS]
    assert not done.is_open and merged_prs(ff, n)
    _no_false_success(ff)


def test_a_sigkilled_runner_posts_nothing_and_the_reaper_resets_it(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w4-alpha"
    n = file_issue(ff, left, "Fault: the runner is SIGKILLed", labels=["demo:hang", "demo:once"])
    with ff.context() as ctx:
        r = dispatch(ctx, n, worker=w)
    assert r.launched, r.line()
    left.units.append((w, n))
    ff.wait_marker(n, Kind.START)

    pid = ff.must(w, f"systemctl --user show task-{n} -p MainPID --value").strip()
    assert pid.isdigit() and int(pid) > 0, pid
    ff.must(w, f"kill -KILL {pid}")
    wait_until(f"task-{n} gone on {w}", lambda: not ff.live_units(w, n), 60)
    # The agent went with the unit's cgroup, and no close-out was posted: a KILL cannot be caught.
    # (a bracket in the pattern: the shell that runs pgrep does not match itself)
    assert ff.sh(w, "pgrep -u \"$(id -u)\" -f 'fleet[.]agents[.]demo'")[0] == 1
    time.sleep(SETTLE_S)
    assert kinds(ff.issue(n)) == [Kind.START]

    _older_than_threshold(ff, n)
    with ff.context() as ctx:
        report = reap(ctx, apply=True)
    assert report.reaped == [n], report.to_json()
    reaped = history(ff.issue(n), "fleet").last_of(Kind.REAPED)
    assert reaped is not None and (reaped.get("worker"), reaped.get("run")) == (w, r.run_id)

    done = _completes_after_reap(ff, left, n)
    assert kinds(done) == [Kind.START, Kind.REAPED, Kind.START, Kind.SUCCESS]
    _no_false_success(ff)


# The hand path's order: the oldest first. Across containers the repair compares wall-clock starts,
# which systemd reports to the second, so consecutive starts are spaced past a second boundary.
DUPLICATES = ("w4-beta", "w4-alpha", "w1")
SPACING_S = 1.5


def test_duplicate_units_on_two_masters_are_repaired_oldest_wins(
    ff: FaultFleet, left: Leftovers
) -> None:
    n = file_issue(ff, left, "Fault: duplicate units by a hand path", labels=["demo:hang"])
    left.units += [(w, n) for w in DUPLICATES]
    with ff.context() as ctx:
        for i, name in enumerate(DUPLICATES):
            if i:
                time.sleep(SPACING_S)
            w = ctx.worker(name)
            assert w is not None
            view, _ = probe_worker(ctx, w)
            run_id = f"hand-{i}-{n}"
            # Straight to the supervisor: no fleet lock, no probe of the other workers (D4).
            claim = ctx.supervisor(w).start(
                n,
                runner_argv(ctx, w, n, run_id),
                env={"PATH": view.path or "/usr/bin:/bin", "FLEET_INVENTORY": str(ctx.inventory.path),
                     "FLEET_RUN_ID": run_id},
                max_run_s=w.max_run_s,
            )  # fmt: skip
            assert claim.launched, claim.detail
    wait_until(f"three start markers on #{n}", lambda: kinds(ff.issue(n)).count(Kind.START) == 3)
    assert all(ff.live_units(w, n) for w in DUPLICATES)

    with ff.context() as ctx:
        report = repair(ctx, apply=True)
    assert report.outcome == "repaired", report.to_json()
    decision = next(d for d in report.decisions if d.issue == n)
    assert decision.keep is not None and who(decision.keep) == "w4-beta/beta", decision.why
    assert sorted(who(u) for u in decision.stop) == ["w1/alpha", "w4-alpha/alpha"]
    assert sorted(report.stopped) == [f"#{n} w1/alpha", f"#{n} w4-alpha/alpha"]

    # The oldest goes on; the others are gone, each with a superseded marker naming the keeper.
    assert ff.live_units("w4-beta", n)
    assert not ff.live_units("w4-alpha", n) and not ff.live_units("w1", n)
    issue = ff.issue(n)
    superseded = [m for m in history(issue, "fleet").markers if m.kind is Kind.SUPERSEDED]
    assert sorted(m.get("stopped") or "" for m in superseded) == ["w1/alpha", "w4-alpha/alpha"]
    assert {m.get("kept") for m in superseded} == {"w4-beta/beta"}
    assert kinds(issue)[-1] is Kind.SUPERSEDED
    assert Kind.SUCCESS not in kinds(issue) and Kind.FAILED not in kinds(issue)
    with ff.context() as ctx:
        waiting = select(snapshot(ctx)).reason_for(n)
    assert waiting is not None and waiting.state == WaitState.RUNNING, (
        waiting
    )  # held by the kept run
