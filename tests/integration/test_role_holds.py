"""A pause or a halt holds the keeping-honest roles: with --apply they decide and report, and write
nothing; lifted, the same call writes (seed 001 §10: a paused tick decides only cancels)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet.context import FleetContext
from fleet.control.switches import SwitchName, flag_path, halt_path, remove_switch, write_switch
from fleet.core.markers import Kind, render
from fleet.roles.announcer import announce
from fleet.roles.reaper import reap
from tests.integration.fleet_fixture import Fleet, all_comments, kinds

pytestmark = pytest.mark.timeout(120)


def _orphan(f: Fleet) -> tuple[int, FleetContext]:
    """An open issue whose last word is a start with no unit anywhere, read by a clock past the
    reaper threshold: exactly what reap --apply resets."""
    n = f.board.create_issue("orphaned run")
    f.board.comment(n, render(Kind.START, {"worker": "w1", "run": "r1"}))
    skew = timedelta(seconds=f.inventory.policy.reaper_threshold_s + 60)
    return n, FleetContext(f.inventory, f.board, clock=lambda: datetime.now(UTC) + skew)


@pytest.mark.parametrize("switch", ["PAUSE", "halt file"])
def test_reap_is_held_by_a_pause_or_halt_and_runs_once_lifted(
    fleet: Fleet, switch: str, capfd: pytest.CaptureFixture[str]
) -> None:
    n, late = _orphan(fleet)
    path = (
        flag_path(fleet.inventory, SwitchName.PAUSE)
        if switch == SwitchName.PAUSE
        else halt_path(fleet.inventory)
    )
    write_switch(switch, path, "forge migration", author="ops")
    before = all_comments(fleet.board)
    with late:
        held = reap(late, apply=True)
        assert held.outcome == "held" and held.reaped == []
        assert [d.issue for d in held.decisions if d.reap] == [n]  # decided, reported
        assert all_comments(fleet.board) == before  # and nothing written
        assert f"reap held by the {switch} (forge migration)" in capfd.readouterr().err
        assert remove_switch(path)
        lifted = reap(late, apply=True)
    assert lifted.outcome == "reaped" and lifted.reaped == [n]
    issue = fleet.board.issue(n)
    assert issue is not None and kinds(issue)[-1] is Kind.REAPED


def test_announce_is_held_by_a_pause(fleet: Fleet) -> None:
    """No heartbeat was ever written: a stall the announcer reports — but not while paused."""
    write_switch(SwitchName.PAUSE, flag_path(fleet.inventory, SwitchName.PAUSE), "", author="ops")
    held = announce(fleet.ctx, apply=True)
    assert held.outcome == "held"
    assert fleet.board.list_issues() == ()  # type: ignore[attr-defined]
    remove_switch(flag_path(fleet.inventory, SwitchName.PAUSE))
    assert announce(fleet.ctx, apply=True).outcome == "filed"
    assert len(fleet.board.list_issues()) == 1  # type: ignore[attr-defined]


def test_setting_drain_again_without_a_reason_keeps_who_and_why(fleet: Fleet) -> None:
    from fleet.cmd.control import set_flag
    from fleet.control.switches import SwitchName, read_switch

    inv = str(fleet.inventory_path)
    set_flag(inv, SwitchName.DRAIN, "kernel upgrade", "ops")
    set_flag(inv, SwitchName.DRAIN, "", None)  # `invoke drain --wait 600` to watch it
    again = read_switch(SwitchName.DRAIN, flag_path(fleet.inventory, SwitchName.DRAIN))
    assert again is not None and (again.reason, again.author) == ("kernel upgrade", "ops")


def test_a_held_apply_does_not_say_apply(fleet: Fleet) -> None:
    from fleet.cmd.hygiene import reap_lines

    n, late = _orphan(fleet)
    write_switch(
        SwitchName.PAUSE, flag_path(fleet.inventory, SwitchName.PAUSE), "audit", author="ops"
    )
    with late:
        lines = reap_lines(reap(late, apply=True), apply=True)
    assert lines[0].startswith("held") and f"#{n}: would reap" in "\n".join(lines)
