"""fleet-status names every shape in the seeds' words (seed 001 §11): for each word, a snapshot built
to show it, rendered by the production ``render`` — and ``--json`` says the same thing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta

import pytest

from fleet.control.switches import Switch, Switches
from fleet.core.markers import Kind
from fleet.core.model import Capacity, CapacitySource, Plan, Reach, Snapshot, Unit, iso
from fleet.core.select import select
from fleet.views.status import as_json, heartbeat_line, render, report
from tests.builders import NOW, halt, issue, marker, snapshot, worker

PERIOD = 300
OFF = Switches(None, None, None)


def unit_since(n: int, minutes: int, master: str = "agent") -> Unit:
    return Unit(n, "", master, "active", 1, NOW - timedelta(minutes=minutes))


def _due(minutes: int) -> dict[str, object]:
    return {"due": iso(NOW + timedelta(minutes=minutes))}


def _spent(times: int) -> list:  # type: ignore[type-arg]
    out = []
    for _ in range(times):
        out += [marker(Kind.START), marker(Kind.FAILED)]
    return out


def _dark(source: CapacitySource, reset_in_min: int | None):  # type: ignore[no-untyped-def]
    reset = NOW + timedelta(minutes=reset_in_min) if reset_in_min is not None else None
    w = worker("w1")
    return w.__class__(w.name, w.lane, w.reach, Capacity(source, reset, "429 in a test"))


# word -> (snapshot, the item's state word, fragments the text must hold)
CASES: dict[str, tuple[Callable[[], Snapshot], str, list[str]]] = {
    "eligible": (lambda: snapshot(issue(1)), "eligible", ["would dispatch to w1"]),
    "running (where, since when)": (
        lambda: snapshot(
            issue(7, timeline=[marker(Kind.START)]),
            workers=[worker("w1", units=[unit_since(7, 5)])],
        ),
        "running",
        ["running on w1/agent since", "(5m ago)", "task-7@agent active since"],
    ),
    "running on a red baseline (check 7 advisory)": (
        lambda: snapshot(
            issue(8, timeline=[marker(Kind.START, {"baseline": "red"})]),
            workers=[worker("w1", units=[unit_since(8, 2)])],
        ),
        "running",
        ["running on w1/agent since", "started on a red CI baseline", "spends no attempt"],
    ),
    "parked until T": (
        lambda: snapshot(issue(5, timeline=[marker(Kind.START), marker(Kind.PARKED, _due(10))])),
        "parked",
        ["parked until " + (NOW + timedelta(minutes=10)).isoformat(timespec="seconds"), "in 10m"],
    ),
    "blocked by #N": (
        lambda: snapshot(issue(1), issue(2, blocked_by=[1])),
        "blocked",
        ["blocked by #1"],
    ),
    "held (label)": (
        lambda: snapshot(issue(3, labels=["hold"])),
        "held",
        ["hold label 'hold'"],
    ),
    "held (assignee)": (
        lambda: snapshot(issue(3, assignees=["alice"])),
        "held",
        ["assigned to alice"],
    ),
    "dark (source, reset unknown)": (
        lambda: snapshot(issue(1), workers=[_dark(CapacitySource.RATE_LIMIT, None)]),
        "dark",
        ["capacity-dark", "source rate_limit, reset unknown", "w1 ", " dark ("],
    ),
    "dark (source, reset at T)": (
        lambda: snapshot(issue(1), workers=[_dark(CapacitySource.RATE_LIMIT, 30)]),
        "dark",
        [
            "source rate_limit, reset " + (NOW + timedelta(minutes=30)).isoformat("T", "seconds"),
            "clears on a clock, in 30m",
        ],
    ),
    "dark (revoked)": (
        lambda: snapshot(issue(1), workers=[_dark(CapacitySource.REVOKED, None)]),
        "dark",
        ["source revoked", "a clock never clears it"],
    ),
    "unreachable": (
        lambda: snapshot(issue(1), workers=[worker("w1", reach=Reach.UNREACHABLE)]),
        "unreachable",
        ["no worker is reachable", " unreachable ("],
    ),
    "tombstone": (
        lambda: snapshot(issue(4, timeline=[marker(Kind.START), marker(Kind.SUCCESS)])),
        "tombstone",
        ["tombstone", "close it if the work landed"],
    ),
    "exhausted attempts": (
        lambda: snapshot(issue(6, timeline=_spent(3))),
        "exhausted",
        ["exhausted attempts: 3 attempts of 3 spent"],
    ),
    "halted (file, reason and age)": (
        lambda: snapshot(issue(1), halts=[halt("db migration", since=NOW - timedelta(minutes=5))]),
        "halted",
        ["HALTED — halted by file", "set 5m ago: db migration", "halt file   ON —"],
    ),
    "halted (file without a reason)": (
        lambda: snapshot(issue(1), halts=[halt(None, since=NOW - timedelta(hours=2))]),
        "halted",
        ["no reason was recorded", "set 2h00m ago"],
    ),
    "halted (issue)": (
        lambda: snapshot(issue(1), issue(9, "HALT FLEET", body="bad deploy")),
        "halted",
        ["halted by issue #9", "halt issue  ON —", "bad deploy"],
    ),
    "in flight, orphaned": (
        lambda: snapshot(issue(8, timeline=[marker(Kind.START)])),
        "latched",
        ["in flight: start marker", "orphaned", "invoke reap", "not idle: in flight #8"],
    ),
    "in flight, could not check": (
        lambda: snapshot(
            issue(8, timeline=[marker(Kind.START)]),
            workers=[worker("w1"), worker("w2", reach=Reach.UNREACHABLE)],
        ),
        "latched",
        ["w2 could not be checked", "not an orphan yet", "could not check worker w2"],
    ),
}


def _text(snap: Snapshot, switches: Switches | None = OFF) -> tuple[str, Plan]:
    plan = select(snap)
    return render(snap, plan, None, PERIOD, switches=switches), plan


@pytest.mark.parametrize("word", list(CASES), ids=list(CASES))
def test_every_state_has_its_word(word: str) -> None:
    build, state, fragments = CASES[word]
    snap = build()
    text, plan = _text(snap)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    rows = as_json(snap, plan, None, switches=OFF)["items"]
    assert state in {r["state"] for r in rows}, rows
    for r in rows:  # the JSON's words are the text's words
        assert f"{r['state']:<12}" in text and r["reason"] in text


def test_every_switch_is_shown_when_off() -> None:
    text, _ = _text(snapshot(issue(1)))
    assert "halt file   off" in text
    assert "halt issue  none open (title 'HALT FLEET')" in text
    assert "PAUSE       off" in text and "DRAIN       off" in text
    assert "\nidle: no unit is live, nothing is parked or in flight" in text


def _on(name: str, reason: str | None) -> Switch:
    return Switch(name, f"/s/{name}", reason, "ops", NOW - timedelta(minutes=3))


@pytest.mark.parametrize(
    ("switches", "head", "line", "eligible"),
    [
        (
            Switches(None, _on("PAUSE", "vendor outage"), None),
            "PAUSED — only cancels are decided",
            "PAUSE       ON — set by ops, 3m ago: vendor outage",
            "but PAUSE is on: only cancels are decided",
        ),
        (
            Switches(None, None, _on("DRAIN", None)),
            "DRAINING — no new work starts",
            "DRAIN       ON — set by ops, 3m ago: no reason was recorded",
            "but DRAIN is on: no new work starts",
        ),
    ],
)
def test_pause_and_drain_are_named_and_explain_the_eligible(
    switches: Switches, head: str, line: str, eligible: str
) -> None:
    snap = snapshot(issue(1))
    text, plan = _text(snap, switches)
    assert head in text and line in text and eligible in text
    j = as_json(snap, plan, None, switches=switches)
    name = "pause" if switches.pause else "drain"
    assert j["switches"][name]["on"] is True and j["switches"][name]["author"] == "ops"
    assert j["items"][0]["held_by"] == name.upper()


def test_a_caller_that_did_not_read_the_flags_says_so() -> None:
    text, _ = _text(snapshot(issue(1)), None)
    assert "PAUSE       not read by this caller" in text


def test_the_idle_verdict_is_in_the_text_and_the_json() -> None:
    snap = snapshot(
        issue(7, timeline=[marker(Kind.START)]), workers=[worker("w1", units=[unit_since(7, 1)])]
    )
    text, plan = _text(snap)
    assert "not idle: live task-7 on w1/agent (active)" in text
    assert as_json(snap, plan, None, switches=OFF)["idle"]["idle"] is False


# -- the heartbeat: "nothing to do" and "not running" never look alike (D14) -------------------------
def _hb(outcome: str, minutes_ago: float, **extra: object) -> dict[str, object]:
    counts = {"planned": 0, "launched": 0, "refused": 0, "waiting": 2}
    return {
        "at": iso(NOW - timedelta(minutes=minutes_ago)),
        "outcome": outcome,
        "counts": counts,
        **extra,
    }


def test_no_heartbeat_is_not_running() -> None:
    assert "NOT RUNNING" in heartbeat_line(None, NOW, PERIOD)


def test_a_fresh_idle_heartbeat_is_nothing_to_do() -> None:
    line = heartbeat_line(_hb("idle", 2), NOW, PERIOD)
    assert line.startswith("heartbeat: 2m ago, outcome idle — the last sweep found nothing")
    assert "NOT RUNNING" not in line and "waiting 2" in line


def test_a_stale_heartbeat_is_not_running_and_says_what_it_last_did() -> None:
    line = heartbeat_line(_hb("idle", 11), NOW, PERIOD)
    assert "NOT RUNNING: older than twice the timer period (300s)" in line
    assert "found nothing to dispatch" in line


@pytest.mark.parametrize(
    ("outcome", "words"),
    [
        ("dispatched", "dispatched work"),
        ("halted", "kill switch on"),
        ("dry-run", "dry run"),
        ("failed", "failed (exit 50: dispatch=0 waiting=0 BOARD-UNREADABLE)"),
    ],
)
def test_every_outcome_has_words(outcome: str, words: str) -> None:
    hb = _hb(outcome, 1, exit=50, summary="dispatch=0 waiting=0 BOARD-UNREADABLE")
    assert words in heartbeat_line(hb, NOW, PERIOD)


def test_an_unreadable_heartbeat_says_it_cannot_tell() -> None:
    assert "cannot tell" in heartbeat_line({"at": "yesterday"}, NOW, PERIOD)


def test_the_json_carries_the_heartbeat_line() -> None:
    snap = snapshot(issue(1))
    j = as_json(snap, select(snap), _hb("idle", 1), switches=OFF)
    assert j["heartbeat_line"].startswith("heartbeat: 60s ago, outcome idle")


def test_the_text_and_the_json_read_the_same_typed_rows() -> None:
    snap = snapshot(
        issue(1), issue(7, timeline=[marker(Kind.START)]),
        workers=[worker("w1", units=[unit_since(7, 1)])],
    )  # fmt: skip
    plan = select(snap)
    rep = report(snap, plan, None, PERIOD, switches=OFF)
    assert [(r.issue, r.state) for r in rep.items] == [(1, "eligible"), (7, "running")]
    assert rep.workers[0].units[0].text().startswith("task-7@agent active since ")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.items[0].reason = "edited"  # type: ignore[misc]
    assert rep.text() == render(snap, plan, None, PERIOD, switches=OFF)
    assert rep.to_json() == as_json(snap, plan, None, switches=OFF, period_s=PERIOD)
    one = report(snap, plan, None, PERIOD, 7, switches=OFF)
    assert [r.issue for r in one.items] == [7] and one.workers == rep.workers
