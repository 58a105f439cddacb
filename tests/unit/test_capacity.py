"""Capacity-dark (D8): recognise every limit text, never fabricate a reset, two kinds of dark."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.model import Capacity, CapacitySource
from fleet.runner.capacity import (
    LimitSignal,
    capacity_path,
    clear_capacity,
    describe,
    read_capacity,
    resolve_clock,
    to_capacity,
    write_capacity,
)
from fleet.runner.envelope import Envelope, envelope_from

# 10:00 UTC on a March day before the EU DST switch: Lisbon = UTC+0, Paris = UTC+1.
NOW = datetime(2026, 3, 10, 10, 0, tzinfo=UTC)
RATE, REVOKED = CapacitySource.RATE_LIMIT, CapacitySource.REVOKED


def env(**fields: object) -> Envelope:
    return envelope_from({"type": "result", "subtype": "success", "num_turns": 1, **fields})


def test_a_clock_already_past_today_rolls_forward_a_day() -> None:
    later = datetime(2026, 3, 10, 14, 0, tzinfo=UTC)
    assert resolve_clock("1pm", "Europe/Lisbon", later) == datetime(2026, 3, 11, 13, tzinfo=UTC)


def test_rolling_forward_across_a_dst_switch_keeps_the_local_clock() -> None:
    # Lisbon moves to UTC+1 on 2026-03-29: "1pm" tomorrow is 12:00 UTC, not today + 24 h.
    now = datetime(2026, 3, 28, 14, 0, tzinfo=UTC)
    assert resolve_clock("1pm", "Europe/Lisbon", now) == datetime(2026, 3, 29, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        pytest.param("13:00", datetime(2026, 3, 10, 13, tzinfo=UTC), id="24-hour"),
        pytest.param("12am", datetime(2026, 3, 11, 0, tzinfo=UTC), id="midnight-rolls"),
        pytest.param("12pm", datetime(2026, 3, 10, 12, tzinfo=UTC), id="noon"),
        pytest.param("10am", datetime(2026, 3, 10, 10, tzinfo=UTC), id="now-is-not-past"),
        pytest.param("Oct 9, 5am", datetime(2026, 10, 9, 4, tzinfo=UTC), id="month-day"),
        pytest.param("Mar 1 at 5am", datetime(2027, 3, 1, 5, tzinfo=UTC), id="date-passed"),
        pytest.param("13pm", None, id="bad-12h-hour"),
        pytest.param("25:00", None, id="bad-hour"),
        pytest.param("Feb 30, 1am", None, id="no-such-date"),
        pytest.param("soon", None, id="not-a-clock"),
    ],
)
def test_resolve_clock(clock: str, expected: datetime | None) -> None:
    assert resolve_clock(clock, "Europe/Lisbon", NOW) == expected


@pytest.mark.parametrize("zone", ["…", "Mars/Olympus", "../../etc/passwd", ""])
def test_an_unknown_zone_resolves_to_no_reset(zone: str) -> None:
    assert resolve_clock("1pm", zone, NOW) is None


ZONES = ["UTC", "Asia/Tokyo", "Europe/Lisbon", "America/New_York", "Australia/Lord_Howe"]


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
    ),
    st.integers(0, 23),
    st.integers(0, 59),
    st.sampled_from(ZONES),
)
def test_a_resolved_reset_is_never_in_the_past(
    now: datetime, hour: int, minute: int, zone: str
) -> None:
    reset = resolve_clock(f"{hour}:{minute:02d}", zone, now)
    assert reset is not None
    assert now <= reset <= now + timedelta(hours=25)
    if zone in ("UTC", "Asia/Tokyo"):  # no DST: the local clock reads exactly as stated
        local = reset.astimezone(ZoneInfo(zone))
        assert (local.hour, local.minute) == (hour, minute)


def test_state_file_round_trips(tmp_path: Path) -> None:
    path = capacity_path(tmp_path / "state")
    signal = LimitSignal(RATE, datetime(2026, 3, 10, 13, 0, tzinfo=UTC), "You've hit your limit")
    cap = to_capacity(signal, now=NOW, issue=17)
    write_capacity(path, cap)
    assert path.name == "capacity.json"
    assert read_capacity(path) == (cap, None)
    assert [p.name for p in path.parent.iterdir()] == ["capacity.json"]  # no temp file left
    assert clear_capacity(path) is True
    assert clear_capacity(path) is False
    assert read_capacity(path) == (None, None)


def test_unknown_reset_round_trips_as_null(tmp_path: Path) -> None:
    path = capacity_path(tmp_path)
    cap = Capacity(REVOKED, None, "api_error_status=401", NOW, None)
    write_capacity(path, cap)
    assert json.loads(path.read_text())["reset_at"] is None
    assert read_capacity(path) == (cap, None)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("", id="empty"),
        pytest.param("{not json", id="not-json"),
        pytest.param("[1, 2]", id="a-list"),
        pytest.param('{"source": "sunspots"}', id="unknown-source"),
        pytest.param('{"source": "rate_limit", "reset_at": 5}', id="reset-not-a-string"),
        pytest.param('{"source": "rate_limit", "reset_at": "yesterday"}', id="reset-not-iso"),
        pytest.param('{"source": "revoked", "issue": "7"}', id="issue-not-an-int"),
    ],
)
def test_a_garbled_state_file_fails_open_with_a_warning(tmp_path: Path, content: str) -> None:
    path = capacity_path(tmp_path)
    path.write_text(content)
    cap, warning = read_capacity(path)
    assert cap is None
    assert warning is not None and "treated as not dark" in warning and str(path) in warning


def test_an_unreadable_state_file_fails_open_with_a_warning(tmp_path: Path) -> None:
    path = capacity_path(tmp_path)
    path.mkdir()  # a directory where the file should be: reading it is an OSError
    cap, warning = read_capacity(path)
    assert cap is None and warning is not None and "unreadable" in warning


def test_the_two_kinds_of_dark_get_opposite_remedies(tmp_path: Path) -> None:
    path = capacity_path(tmp_path)
    revoked = describe(Capacity(REVOKED, None, "api_error_status=401", NOW), NOW, path=path)
    assert revoked.startswith("dark: entitlement revoked — a clock will not clear this")
    assert f"delete {path}" in revoked and "until" not in revoked

    reset = NOW + timedelta(hours=3, minutes=5)
    limited = describe(Capacity(RATE, reset, "You've hit your limit"), NOW)
    assert limited == "dark: rate limit until 2026-03-10 13:05 UTC (in 3h05m)"
    assert "renew" not in limited

    unknown = describe(Capacity(RATE, None, "You've hit your session limit"), NOW)
    assert unknown.startswith("dark: rate limit, reset unknown")

    passed = describe(Capacity(RATE, NOW - timedelta(minutes=42), "x"), NOW)
    assert "passed 42m ago" in passed
