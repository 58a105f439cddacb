"""Launch deaths before the start marker, pure: the record's parse, the count, the state and the
report. The real-process proof is tests/integration/test_launch_deaths.py."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fleet.core.announce import StallKind, assess, report_for, title_for
from fleet.core.closing import has_live_keyword
from fleet.core.markers import Kind
from fleet.core.model import LaunchDeath, WaitState, iso
from fleet.core.select import select
from fleet.inventory import WorkerConfig
from fleet.observe import probe_command, split_deaths, split_probe
from fleet.runner.prestart import deaths_path, forget_issue, parse_deaths, record_death
from fleet.views.status import as_json
from tests.builders import NOW, issue, marker, release, snapshot, worker


def _deaths(n: int, count: int, *, minutes_ago: int = 1, code: int = 70) -> tuple[LaunchDeath, ...]:
    at = NOW - timedelta(minutes=minutes_ago)
    return tuple(
        LaunchDeath(n, "w1", f"r{i}", code, at + timedelta(seconds=i), "stale runner clone")
        for i in range(count)
    )


def _snap(*items, deaths=()):  # type: ignore[no-untyped-def]
    return snapshot(*items, workers=[replace(worker("w1", "a"), deaths=tuple(deaths))])


def test_deaths_under_the_cap_leave_the_item_eligible() -> None:
    plan = select(_snap(issue(1), deaths=_deaths(1, 2)))
    assert [d.issue for d in plan.dispatch] == [1]


def test_deaths_at_the_cap_are_their_own_state() -> None:
    plan = select(_snap(issue(1), deaths=_deaths(1, 3)))
    w = plan.reason_for(1)
    assert w is not None and (w.predicate, w.state) == (7, WaitState.DEAD_ON_LAUNCH)
    assert "3 launches died before their start marker" in w.reason
    assert "w1 exit 70 (stale runner clone)" in w.reason


def test_a_later_word_on_the_issue_restarts_the_count() -> None:
    after = NOW - timedelta(seconds=10)
    for word in (release(), marker(Kind.FAILED, at=after)):
        word = replace(word, created_at=after)
        plan = select(_snap(issue(1, timeline=[word]), deaths=_deaths(1, 3)))
        assert plan.reason_for(1) is None or plan.reason_for(1).state != WaitState.DEAD_ON_LAUNCH  # type: ignore[union-attr]


def test_another_issue_s_deaths_do_not_count() -> None:
    plan = select(_snap(issue(1), issue(2), deaths=_deaths(2, 5)))
    assert 1 in [d.issue for d in plan.dispatch]
    assert plan.reason_for(2).state == WaitState.DEAD_ON_LAUNCH  # type: ignore[union-attr]


def test_exhausted_attempts_are_named_first() -> None:
    spent = [m for _ in range(3) for m in (marker(Kind.START), marker(Kind.FAILED))]
    plan = select(_snap(issue(1, timeline=spent), deaths=_deaths(1, 3, minutes_ago=-1)))
    assert plan.reason_for(1).state == WaitState.EXHAUSTED  # type: ignore[union-attr]


def test_status_and_the_announcer_name_it_with_its_remedy() -> None:
    snap = _snap(issue(1, title="Fixes #9 quietly"), deaths=_deaths(1, 3, code=73))
    plan = select(snap)
    row = next(r for r in as_json(snap, plan, None)["items"] if r["issue"] == 1)
    assert row["state"] == WaitState.DEAD_ON_LAUNCH
    assert "73 = the inventory" in row["reason"] and "fleet:release" in row["reason"]
    found = assess(snap, {"at": iso(NOW), "outcome": "idle"}, NOW, snap.policy)
    (stall,) = [s for s in found.stalls if s.issue == 1]
    assert stall.kind is StallKind.DEAD_ON_LAUNCH and stall.worker == "w1"
    report = report_for(stall)
    assert title_for(stall) == "fleet: stalled #1 (its launches die before the start marker)"
    assert "task-1" in report.body and not has_live_keyword(report.body)


# -- the record on the worker -------------------------------------------------------------------


def test_record_then_parse_then_forget(tmp_path: Path) -> None:
    for n, code in ((4, 70), (5, 73), (4, 74)):
        assert (
            record_death(tmp_path, issue=n, run_id="r", code=code, why="x" * 999, now=NOW) is None
        )
    deaths, bad = parse_deaths(deaths_path(tmp_path).read_text(), worker="w9")
    assert bad == [] and [(d.issue, d.exit, d.worker) for d in deaths] == [
        (4, 70, "w9"),
        (5, 73, "w9"),
        (4, 74, "w9"),
    ]
    assert all(len(d.why) <= 200 and d.at == NOW for d in deaths)
    assert forget_issue(tmp_path, 4) is None
    left, _ = parse_deaths(deaths_path(tmp_path).read_text(), worker="w9")
    assert [d.issue for d in left] == [5]


def test_an_unwritable_record_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    warning = record_death(tmp_path / "file", issue=1, run_id="r", code=70, why="w", now=NOW)
    assert warning is not None and "could not record" in warning


@given(st.text(max_size=300))
def test_any_garbage_parses_to_deaths_and_warnings_never_an_error(text: str) -> None:
    deaths, bad = parse_deaths(text, worker="w1")
    assert len(deaths) + len(bad) <= len(text.splitlines())


def test_the_probe_carries_the_record_before_the_capacity_file() -> None:
    line = json.dumps({"issue": 3, "run": "r", "exit": 70, "at": iso(NOW), "why": "stale"})
    out = f"fleet-reach:ok\nfleet-path:/bin\nfleet-launch-deaths:\n{line}\n\nfleet-capacity:\n"
    head, _path, cap = split_probe(out)
    deaths, bad = parse_deaths(split_deaths(head), worker="w1")
    assert cap is None and bad == [] and [d.issue for d in deaths] == [3]
    assert "launch-deaths.jsonl" in probe_command(worker_config())


def worker_config() -> WorkerConfig:
    return WorkerConfig(
        "w1", "local", None, 22, None, "a", "/tmp/c", None, None, (), "agent", "portable",
        None, None, "/tmp/x", "python3", 60,
    )  # fmt: skip
