"""The sweeper's tick on a real board and a real local worker: it dispatches through dispatch(),
a halt stops it before any board write, an unreadable board fails closed only for --apply, and a
heartbeat is written on every exit path (D14) so "idle" and "not running" never look alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.control.switches import SwitchName, flag_path, write_halt_file, write_switch
from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.core.model import CIState
from fleet.dispatch import dispatch
from fleet.roles import sweeper as sweeper_module
from fleet.roles.sweeper import DRY_RUN_HEARTBEAT, HEARTBEAT, tick
from fleet.trace import read_trace
from tests.integration.fleet_fixture import Fleet, all_comments, has_marker, wait_for

pytestmark = pytest.mark.timeout(120)


def _heartbeat(f: Fleet, apply: bool = True) -> dict[str, object]:
    name = HEARTBEAT if apply else DRY_RUN_HEARTBEAT
    return json.loads((Path(f.inventory.state_dir) / name).read_text())


def test_an_empty_board_is_idle_and_says_so(fleet: Fleet) -> None:
    report = tick(fleet.ctx, apply=True)
    assert (report.outcome, report.exit) == ("idle", Exit.OK)
    assert _heartbeat(fleet)["outcome"] == "idle"


def test_a_sweep_dispatches_and_the_run_lands(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Add a greeting")
    held = fleet.board.create_issue("Not now", labels=["hold"])
    report = tick(fleet.ctx, apply=True)
    assert report.outcome == "dispatched"
    assert [r.issue for r in report.results if r.launched] == [n]
    assert report.plan.reason_for(held) is not None
    wait_for(fleet.board, n, has_marker(Kind.SUCCESS))
    assert _heartbeat(fleet)["outcome"] == "dispatched"
    events = [e["event"] for e in read_trace(Path(fleet.inventory.state_dir) / "trace.jsonl")]
    assert events[:5] == ["SWEEP", "CLAIM", "DISPATCH", "LAND", "RELEASE"], events


def test_a_halt_file_stops_apply_before_any_board_write(fleet: Fleet) -> None:
    fleet.board.create_issue("Add a greeting")
    write_halt_file(Path(fleet.inventory.halt.file), "forge migration", author="ops")
    before = all_comments(fleet.board)
    report = tick(fleet.ctx, apply=True)
    assert report.outcome == "halted" and not report.results
    assert all_comments(fleet.board) == before
    assert _heartbeat(fleet)["outcome"] == "halted"


@pytest.mark.parametrize(("apply", "code"), [(True, Exit.BOARD_UNREADABLE), (False, Exit.OK)])
def test_an_unreadable_board_fails_closed_only_for_apply(
    fleet: Fleet, apply: bool, code: Exit
) -> None:
    path = fleet.inventory.board.path
    assert path is not None
    fleet.board.disconnect()  # type: ignore[attr-defined]
    path.write_bytes(b"not a database" * 200)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with FleetContext(fleet.inventory, LocalBoard(path, fleet.inventory.board.origin)) as ctx:
        report = tick(ctx, apply=apply)
    assert (report.outcome, report.exit) == ("failed", code)
    assert report.plan.board_error and not report.results
    assert _heartbeat(fleet, apply)["outcome"] == "failed"


@pytest.mark.parametrize(
    ("switch", "outcome"), [(SwitchName.PAUSE, "paused"), (SwitchName.DRAIN, "draining")]
)
def test_a_paused_or_draining_sweep_dispatches_nothing_and_says_so(
    fleet: Fleet, switch: str, outcome: str
) -> None:
    fleet.board.create_issue("Add a greeting")
    write_switch(switch, flag_path(fleet.inventory, switch), "maintenance", author="ops")
    before = all_comments(fleet.board)
    report = tick(fleet.ctx, apply=True)
    assert (report.outcome, report.exit, report.results) == (outcome, Exit.OK, [])
    assert all_comments(fleet.board) == before
    assert _heartbeat(fleet)["outcome"] == outcome


class _CountingBoard(LocalBoard):
    """The real board, counting its page reads: what reached the network first."""

    reads = 0

    def read(self):  # type: ignore[no-untyped-def]
        type(self).reads += 1
        return super().read()


def _watched(fleet: Fleet) -> tuple[FleetContext, list[str]]:
    """A context on the counting board whose transports record every worker they open."""
    path = fleet.inventory.board.path
    assert path is not None
    _CountingBoard.reads = 0
    opened: list[str] = []

    def factory(w):  # type: ignore[no-untyped-def]
        from fleet.transport import transport_for

        opened.append(w.name)
        return transport_for(w)

    board = _CountingBoard(path, fleet.inventory.board.origin)
    return FleetContext(fleet.inventory, board, transport_factory=factory), opened


@pytest.mark.parametrize("switch", ["halt file", SwitchName.PAUSE, SwitchName.DRAIN])
def test_a_file_switch_holds_the_tick_before_anything_reaches_the_network(
    fleet: Fleet, switch: str
) -> None:
    # Seed 003: the kill switches are read before the network. Before, a halted tick read the
    # board and probed every worker (installing the notifier on first contact) and only then held.
    fleet.board.create_issue("Add a greeting")
    if switch == "halt file":
        write_halt_file(Path(fleet.inventory.halt.file), "forge migration", author="ops")
    else:
        write_switch(switch, flag_path(fleet.inventory, switch), "audit", author="ops")
    ctx, opened = _watched(fleet)
    with ctx:
        report = tick(ctx, apply=True)
    assert (
        report.outcome
        == {"halt file": "halted", SwitchName.PAUSE: "paused", SwitchName.DRAIN: "draining"}[switch]
    )
    assert (_CountingBoard.reads, opened) == (0, [])


def test_the_halt_issue_holds_the_tick_before_any_worker_is_probed(fleet: Fleet) -> None:
    fleet.board.create_issue("Add a greeting")
    fleet.board.create_issue("HALT FLEET", "bad deploy")
    ctx, opened = _watched(fleet)
    with ctx:
        report = tick(ctx, apply=True)
    assert (report.outcome, report.results) == ("halted", [])
    assert "bad deploy" in report.plan.halts[0].reason  # type: ignore[operator]
    assert (_CountingBoard.reads, opened) == (1, [])  # the page it needs, and no worker


@pytest.mark.parametrize(
    ("switch", "code"), [("halt file", Exit.HALTED_FILE), (SwitchName.PAUSE, Exit.PAUSED)]
)
def test_dispatch_reads_the_file_switches_before_the_board(
    fleet: Fleet, switch: str, code: Exit
) -> None:
    n = fleet.board.create_issue("Add a greeting")
    if switch == "halt file":
        write_halt_file(Path(fleet.inventory.halt.file), "forge migration", author="ops")
    else:
        write_switch(switch, flag_path(fleet.inventory, switch), "audit", author="ops")
    ctx, opened = _watched(fleet)
    with ctx:
        r = dispatch(ctx, n)
    assert (r.outcome, r.code, r.check) == ("refused", code, 0)
    assert (_CountingBoard.reads, opened) == (0, [])


def test_dispatch_applies_the_halt_issue_before_any_worker_is_probed(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Add a greeting")
    fleet.board.create_issue("HALT FLEET", "bad deploy")
    ctx, opened = _watched(fleet)
    with ctx:
        r = dispatch(ctx, n)
    assert (r.code, opened) == (Exit.HALTED_ISSUE, [])


def test_a_hand_dry_run_leaves_the_timers_heartbeat_alone(fleet: Fleet) -> None:
    tick(fleet.ctx, apply=True)
    timer = _heartbeat(fleet)
    tick(fleet.ctx, apply=False)
    assert _heartbeat(fleet) == timer  # a stopped timer still looks stopped
    assert _heartbeat(fleet, apply=False)["outcome"] == "dry-run"


class _Exploding(LocalBoard):
    """A board whose read raises an error no guard knows: a bug, which must not pass silently."""

    def read(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("parser bug")


def test_a_crashed_sweep_names_itself_in_the_heartbeat(fleet: Fleet) -> None:
    path = fleet.inventory.board.path
    assert path is not None
    board = _Exploding(path, fleet.inventory.board.origin)
    with FleetContext(fleet.inventory, board) as ctx, pytest.raises(RuntimeError):
        tick(ctx, apply=True)
    beat = _heartbeat(fleet)
    assert (beat["outcome"], beat["exit"]) == ("crashed", Exit.SWEEP_CRASHED)
    assert "parser bug" in str(beat["error"])


def test_a_dispatch_path_that_raises_is_not_an_idle_tick(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing to do and a dispatch that broke must not look alike (D14): the planned item is
    landed as cannot-classify and the heartbeat says the tick dispatched, not that it was idle."""
    n = fleet.board.create_issue("Add a greeting", "body")

    def broken(*_a: object, **_k: object) -> list[object]:
        raise RuntimeError("dispatch path bug")

    monkeypatch.setattr(sweeper_module, "dispatch_batch", broken)
    report = tick(fleet.ctx, apply=True)
    assert report.outcome == "dispatched" and report.unclassified == [n], report
    assert report.counts()["unclassified"] == 1
    assert _heartbeat(fleet)["outcome"] == "dispatched"


def test_red_ci_does_not_stop_the_scheduler(fleet: Fleet) -> None:
    # Check 7 is advisory: a red main used to refuse every dispatch of every sweep (exit 28).
    n = fleet.board.create_issue("Add a greeting")
    fleet.board.set_ci(CIState.RED)  # type: ignore[attr-defined]
    report = tick(fleet.ctx, apply=True)
    assert [r.issue for r in report.results if r.launched] == [n], [
        r.line() for r in report.results
    ]
    wait_for(fleet.board, n, has_marker(Kind.SUCCESS))
