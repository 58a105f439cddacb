"""replay's pure core: the SWEEP replayer on built snapshots, the per-issue comparison, and the
registry other roles add their events to."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import fleet.trace.replay as rp
from fleet.core.exits import Exit
from fleet.core.model import Dispatch, Waiting
from fleet.core.select import select
from fleet.trace import TraceError, to_jsonable
from fleet.trace.replay import Comparison, Difference, compare, register, replay, replayers
from tests.builders import issue, snapshot, worker


def _sweep(snap, plan=None) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    return {
        "event": "SWEEP",
        "at": "2025-01-01T00:00:00+00:00",
        "snapshot": to_jsonable(snap),
        "plan": to_jsonable(plan if plan is not None else select(snap)),
    }


SNAP = snapshot(issue(1), issue(2, labels=["hold"]), issue(3, blocked_by=[1]))


def test_a_faithful_recording_reproduces() -> None:
    report = replay([(1, _sweep(SNAP)), (2, {"event": "IDLE"})], source="t")
    assert report.exit() is Exit.OK
    assert report.replayed[0].comparison == Comparison(3)
    assert report.skipped == (("IDLE", 1),)


def test_each_differing_decision_is_named_per_issue() -> None:
    plan = select(SNAP)
    forged = replace(
        plan,
        dispatch=(Dispatch(1, "w7", "forged"),),
        waiting=(*plan.waiting[:1], Waiting(3, 9, "held", "forged")),
    )
    report = replay([(4, _sweep(SNAP, forged))])
    assert report.exit() is Exit.REPLAY_DIFFERS
    diffs = report.replayed[0].comparison.differences
    assert [(d.issue, d.recorded.split(" (")[0]) for d in diffs] == [
        (1, "dispatch to w7"),
        (3, "held"),
    ]
    assert diffs[1].now.startswith("blocked (p4)")
    assert "line 4 SWEEP" in "\n".join(report.lines())


def test_an_issue_decided_twice_in_the_recording_differs() -> None:
    plan = select(SNAP)
    twice = replace(plan, waiting=(*plan.waiting, plan.waiting[0]))
    (diff,) = replay([(1, _sweep(SNAP, twice))]).replayed[0].comparison.differences
    assert diff.issue == plan.waiting[0].issue and " AND " in diff.recorded


def test_a_halted_and_an_unreadable_plan_replay_too() -> None:
    halted = snapshot(issue(1), issue(2, "HALT FLEET"))
    broken = snapshot(board_error="board unreadable: disk I/O error", workers=[worker()])
    report = replay([(1, _sweep(halted)), (2, _sweep(broken))])
    assert report.exit() is Exit.OK and len(report.replayed) == 2


def test_compare_names_decisions_only_one_side_has() -> None:
    c = compare({(1, "decision"): "a", (None, "halts"): "x"}, {(1, "decision"): "a", (2, "d"): "b"})
    assert c.decisions == 3
    assert c.differences == (
        Difference(2, "d", "(no decision)", "b"),
        Difference(None, "halts", "x", "(no decision)"),
    )


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"at": "x"}, "without an 'event' name"),
        ({"event": "SWEEP", "plan": {}}, "SWEEP has no 'snapshot' field"),
        ({**_sweep(SNAP), "plan": {"dispatch": "w1"}}, "plan.dispatch: expected an array"),
    ],
    ids=["no-event", "no-snapshot", "bad-plan"],
)
def test_a_malformed_record_is_a_trace_error_with_its_line(record: dict, words: str) -> None:
    with pytest.raises(TraceError) as err:
        replay([(1, _sweep(SNAP)), (9, record)], source="trace.jsonl")
    assert err.value.line == 9 and words in str(err.value)
    assert str(err.value).startswith("trace.jsonl:9: ")


def test_nothing_replayable_has_its_own_exit() -> None:
    report = replay([(1, {"event": "CLAIM"})])
    assert report.exit() is Exit.NOTHING_TO_REPLAY and not report.replayed


def test_another_role_registers_its_event(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rp, "_REPLAYERS", dict(rp._REPLAYERS))

    def replay_example(record: Any) -> Comparison:
        return compare({(7, "reap"): record["decided"]}, {(7, "reap"): "reset"})

    register("EXAMPLE_ROLE", replay_example)
    assert (
        register("EXAMPLE_ROLE", replay_example) is replay_example
    )  # idempotent for the same function
    with pytest.raises(ValueError, match="already has a replayer"):
        register("EXAMPLE_ROLE", lambda record: Comparison(0))
    report = replay([(1, {"event": "EXAMPLE_ROLE", "decided": "keep"}), (2, _sweep(SNAP))])
    assert [r.event for r in report.differing] == ["EXAMPLE_ROLE"]
    assert set(replayers()) >= {"SWEEP", "EXAMPLE_ROLE"}


def test_load_roles_imports_the_role_modules() -> None:
    notes = rp.load_roles()
    assert all(n.startswith("fleet.roles.") for n in notes)
    assert "SWEEP" in replayers()
