"""Check 7 advisory: a run started on a red CI baseline that fails spends no attempt, bounded."""

from __future__ import annotations

import pytest

from fleet.core.markers import RED_BASELINE_FREE, Kind, history
from fleet.core.model import Policy, WaitState
from fleet.core.select import select
from tests.builders import FLEET, issue, marker, snapshot, worker


def _run(baseline: str, end: Kind) -> list:
    return [marker(Kind.START, {"run": "r", "worker": "w1", "baseline": baseline}), marker(end)]


@pytest.mark.parametrize(
    ("baseline", "end", "attempts", "red"),
    [
        ("red", Kind.FAILED, 0, 1),
        ("red", Kind.TIMED_OUT, 0, 1),
        ("green", Kind.FAILED, 1, 0),
        ("unknown", Kind.FAILED, 1, 0),
        ("red", Kind.STOPPED, 1, 0),  # only a failure the baseline may have caused is free
    ],
)
def test_only_a_failure_on_a_red_baseline_is_free(
    baseline: str, end: Kind, attempts: int, red: int
) -> None:
    h = history(issue(1, timeline=_run(baseline, end)), FLEET)
    assert (h.attempts, h.red_failures) == (attempts, red)


def test_red_failures_count_again_past_the_bound_so_a_red_spell_cannot_loop_forever() -> None:
    runs = [m for _ in range(RED_BASELINE_FREE + 2) for m in _run("red", Kind.FAILED)]
    h = history(issue(1, timeline=runs), FLEET)
    assert (h.red_failures, h.attempts) == (RED_BASELINE_FREE + 2, 2)
    cap = Policy().attempt_cap
    many = [m for _ in range(RED_BASELINE_FREE + cap) for m in _run("red", Kind.FAILED)]
    plan = select(snapshot(issue(1, timeline=many), workers=[worker("w1")]))
    held = plan.reason_for(1)
    assert held is not None and held.state == WaitState.EXHAUSTED
