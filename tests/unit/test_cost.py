"""fleet-status --cost's reading of the per-cycle cost log (D1): pure, so tested without a board."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from fleet.core import cost

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.lists(st.dictionaries(st.sampled_from(["event", "cost", "at", "cost_unit"]), _json)))
def test_any_record_shape_is_read_or_skipped_never_a_crash(events: list[dict[str, object]]) -> None:
    got = cost.recorded_cycles(events, limit=100)
    want = [
        e for e in events
        if e.get("event") == cost.EVENT and type(e.get("cost")) is int
    ]  # fmt: skip
    assert [c.cost for c in got] == [e["cost"] for e in want]


def test_keeps_the_last_cycles_oldest_first_and_summarises() -> None:
    events = [
        {
            "event": cost.EVENT,
            "at": f"2026-11-29T10:0{k}:00+00:00",
            "cost": k,
            "cost_unit": "points",
        }
        for k in range(5)
    ] + [{"event": "SWEEP", "cost": 999}]
    got = cost.recorded_cycles(events, limit=3)
    assert [c.cost for c in got] == [2, 3, 4]
    assert got[0].at == datetime(2026, 11, 29, 10, 2, tzinfo=UTC)
    assert cost.summary(got) == {"cycles": 3, "min": 2, "max": 4, "mean": 3.0}
    text = cost.render(cost.CycleCost(None, 7, "points"), cost.Budget(4993, None), got)
    assert "this read 7 points" in text and "4993 left, resets unknown" in text
    assert "last 3 sweeps: min 2, mean 3.0, max 4" in text


def test_no_records_and_a_failed_read_are_said_not_shown_as_zero() -> None:
    text = cost.render(None, None, [])
    assert "this read failed" in text and "no sweep has recorded a cost yet" in text
    assert cost.as_json(None, None, [])["summary"]["cycles"] == 0
