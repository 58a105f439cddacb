"""The codec is the exact inverse of the trace's encoding: decode(to_jsonable(x)) == x for every
snapshot and plan the model admits, through real JSON text and through a real trace file; and a
value that does not fit its type is a named error with the path to it, never a half-built value."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from fleet.core.model import Issue, IssueState, Plan, Snapshot, Status, Unit
from fleet.core.select import select
from fleet.trace import Trace, TraceError, iter_trace, read_trace, to_jsonable
from fleet.trace.codec import CodecError, decode, decode_plan, decode_snapshot
from tests.builders import issue, snapshot, worker
from tests.strategies import PLANS, SNAPSHOTS, boards

ROUND_TRIP = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _through_json(value: object) -> object:
    """What the trace writes and json reads back (Trace.event's own dumps arguments)."""
    return json.loads(json.dumps(to_jsonable(value), sort_keys=True, ensure_ascii=False))


@ROUND_TRIP
@given(SNAPSHOTS)
def test_any_snapshot_round_trips_exactly(snap: Snapshot) -> None:
    back = decode_snapshot(_through_json(snap))
    assert back == snap
    # Equal is not enough for a replay: the types must be the model's (tuples, enums, datetimes).
    assert isinstance(back.issues, tuple) and all(isinstance(i, Issue) for i in back.issues)
    for i in back.issues:
        assert type(i.state) is IssueState and isinstance(i.labels, tuple)
        assert i.created_at is None or i.created_at.tzinfo is not None
    for w in back.workers:
        assert isinstance(w.units, tuple) and all(type(u) is Unit for u in w.units)


@ROUND_TRIP
@given(PLANS)
def test_any_plan_round_trips_exactly(plan: Plan) -> None:
    assert decode_plan(_through_json(plan)) == plan


@settings(max_examples=60, deadline=None)
@given(boards())
def test_a_decoded_board_plans_the_same(snap: Snapshot) -> None:
    assert select(decode_snapshot(_through_json(snap))) == select(snap)


def test_a_snapshot_through_a_real_trace_file(tmp_path: Path) -> None:
    snap = snapshot(issue(3, labels=["hold"]), issue(4, lane="b"), workers=[worker("w1", "a")])
    path = tmp_path / "trace.jsonl"
    Trace(path).event("SWEEP", snapshot=to_jsonable(snap), plan=to_jsonable(select(snap)))
    (record,) = read_trace(path)
    assert decode_snapshot(record["snapshot"]) == snap
    assert decode_plan(record["plan"]) == select(snap)


def test_microseconds_and_whole_seconds_both_survive() -> None:
    for ts in (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 0, 0, 0, 7, tzinfo=UTC)):
        snap = snapshot(now=ts)
        assert decode_snapshot(_through_json(snap)).now == ts


# -- malformed values: a named error with the path to the value ------------------------------------


def _snap_json() -> dict[str, object]:
    data = _through_json(snapshot(issue(1)))
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("edit", "where", "words"),
    [
        (lambda d: d["issues"][0].update(state="opn"), "snapshot.issues[0].state", "IssueState"),
        (lambda d: d["issues"][0].update(labels="hold"), "snapshot.issues[0].labels", "array"),
        (lambda d: d.update(now="yesterday"), "snapshot.now", "ISO 8601"),
        (lambda d: d.update(now=17), "snapshot.now", "number 17"),
        (lambda d: d["issues"][0].pop("number"), "snapshot.issues[0]", "missing its field"),
        (lambda d: d["issues"][0].update(colour=1), "snapshot.issues[0]", "no field 'colour'"),
        (lambda d: d["workers"][0].update(reach="maybe"), "snapshot.workers[0].reach", "Reach"),
        (lambda d: d["issues"][0].update(number=True), "snapshot.issues[0].number", "integer"),
        (lambda d: d["issues"][0].update(status=5), "snapshot.issues[0].status", "string"),
        (lambda d: d.update(issues={}), "snapshot.issues", "array"),
    ],
    ids=["enum", "tuple", "time", "time-type", "missing", "unknown", "reach", "bool", "opt", "obj"],
)
def test_a_value_that_does_not_fit_names_its_path(edit, where: str, words: str) -> None:  # type: ignore[no-untyped-def]
    data = _snap_json()
    edit(data)
    with pytest.raises(CodecError) as err:
        decode_snapshot(data)
    assert err.value.where == where, str(err.value)
    assert words in str(err.value)


def test_a_missing_defaulted_field_takes_its_default() -> None:
    """A trace written before a defaulted field existed still decodes (the value had the default)."""
    data = _snap_json()
    data["issues"][0].pop("closed_at")  # type: ignore[index]
    data.pop("board_error")
    assert decode_snapshot(data) == snapshot(issue(1))


def test_status_stays_the_boards_text() -> None:
    assert decode(Issue, _through_json(issue(2))).status == Status.TODO.value


# -- the trace reader: a malformed line is a named error with the file and line -------------------


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        (b'{"event": "A"}\n\n{"event": \n', 3, "not a JSON line"),
        (b'{"event": "A"}\n[1, 2]\n', 2, "not a JSON object"),
        (b'{"event": "A"}\n{"event": "\xff"}\n', 2, "not UTF-8"),
    ],
    ids=["truncated", "array", "bytes"],
)
def test_a_malformed_trace_line_names_file_and_line(
    tmp_path: Path, content: bytes, line: int, words: str
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        list(iter_trace(path))
    assert (err.value.path, err.value.line) == (str(path), line)
    assert str(err.value).startswith(f"{path}:{line}: {words}")


def test_a_missing_trace_file_is_a_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as err:
        read_trace(tmp_path / "nope.jsonl")
    assert err.value.line is None and "cannot open" in str(err.value)
