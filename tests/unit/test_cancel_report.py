"""cancel's outcome as a value: one exit code per way a cancel falls short (D20), worst first, and
lines that name every worker it stopped, could not stop, or could not check."""

from __future__ import annotations

import pytest

from fleet.control.cancel import CancelReport, Stopped, outcome_code
from fleet.core.exits import Exit

OK = Stopped("w1", "agent", True, "task-7 stopped (pid 1)")
STUCK = Stopped("w2", "", False, "still held after SIGKILL")
BLIND = "ghost: unreachable: connection refused"


@pytest.mark.parametrize(
    ("marked", "stops", "unchecked", "code"),
    [
        (True, [], [], Exit.OK),
        (True, [OK], [], Exit.OK),
        (True, [OK], [BLIND], Exit.CANCEL_UNCHECKED),
        (True, [OK, STUCK], [BLIND], Exit.CANCEL_NOT_STOPPED),
        (False, [OK], [], Exit.WRITE_FAILED),
        (False, [STUCK], [BLIND], Exit.WRITE_FAILED),
    ],
)
def test_the_worst_shortfall_names_the_code(
    marked: bool, stops: list[Stopped], unchecked: list[str], code: Exit
) -> None:
    assert outcome_code(marked, stops, unchecked) is code


def test_codes_are_distinct_and_in_their_range() -> None:
    assert {Exit.CANCEL_UNCHECKED, Exit.CANCEL_NOT_STOPPED} == {Exit(67), Exit(68)}


def test_lines_name_every_worker() -> None:
    r = CancelReport(7, Exit.CANCEL_NOT_STOPPED, (OK, STUCK), (BLIND,), posted=True)
    text = "\n".join(r.lines())
    assert "stopped task-7 on w1/agent: task-7 stopped" in text
    assert "task-7 on w2 did NOT stop: still held after SIGKILL" in text
    assert "could not check worker ghost: unreachable" in text
    assert "cancelled marker posted" in text and "may still post after the cancel" in text


def test_nothing_live_says_so() -> None:
    assert "#7: no live unit anywhere" in CancelReport(7, Exit.OK, posted=True).lines()
    blind = CancelReport(7, Exit.CANCEL_UNCHECKED, unchecked=(BLIND,), posted=True).lines()
    assert "#7: no live unit on any reachable worker" in blind
    assert "#7: run cancel again once those workers answer" in blind
