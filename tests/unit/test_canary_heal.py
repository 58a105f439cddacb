"""D7/D8's edges, pure: a 429 is transient (not a quota), who may heal a dark worker, the canary.

The real-process proofs of the same rules are in tests/integration/test_capacity_heal.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.agentkinds import ADAPTERS, AgentKind
from fleet.control.switches import Switches
from fleet.core.canary import CANARY_PERIOD_S, canary_due, canary_open
from fleet.core.markers import Kind, parse
from fleet.core.model import Capacity, CapacitySource, Comment, Unit
from fleet.core.select import select
from fleet.runner.capacity import describe, read_capacity, write_capacity
from fleet.runner.closeout import decide_close_out
from fleet.runner.heal import Heal, heal, heal_decision, stamp_canary
from fleet.runner.outcome import Outcome
from fleet.views.status import as_json, render
from tests.builders import NOW, issue, snapshot, worker

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RATE, REVOKED = CapacitySource.RATE_LIMIT, CapacitySource.REVOKED
PERIOD = timedelta(seconds=CANARY_PERIOD_S)


def _envelope_429(turns: int) -> str:
    return json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "num_turns": turns,
            "result": "API Error: Request rejected (429)",
            "api_error_status": 429,
            "terminal_reason": "api_error",
        }
    )


def _close_out(output: str, exit_code: int):  # type: ignore[no-untyped-def]
    return decide_close_out(
        output=output,
        prs=(),
        forge_error=None,
        run_started_at=T,
        exit_code=exit_code,
        signal_name=None,
        timed_out=False,
        workspace_failure=None,
        retries_so_far=0,
        backoffs_s=(240, 480),
        results=None,
        now=T + timedelta(minutes=1),
    )


# -- a 429 is D7's transient signature, not a quota limit ---------------------------------------


def test_a_429_alone_is_not_a_capacity_limit() -> None:
    assert ADAPTERS[AgentKind.CLAUDE].read(_envelope_429(0), 1, T).limit is None


def test_a_429_before_the_first_turn_is_retried_and_darkens_nothing() -> None:
    out = _close_out(f"noise\n{_envelope_429(0)}\n", 1)
    assert out.limit is None
    assert out.decision.outcome is Outcome.RETRY_PARKED, out.decision
    m = parse(Comment(1, "fleet", out.marker, T))
    assert m is not None and m.kind is Kind.PARKED


def test_a_429_after_turns_is_a_failure_of_the_run_not_a_dark_worker() -> None:
    out = _close_out(_envelope_429(3), 1)
    assert out.limit is None
    assert out.decision.outcome is not Outcome.CAPACITY


def test_a_stated_limit_beside_a_429_is_still_a_limit() -> None:
    output = json.dumps({**json.loads(_envelope_429(1)), "result": "You've hit your session limit"})
    signal = ADAPTERS[AgentKind.CLAUDE].read(output, 1, T).limit
    assert signal is not None and signal.source is RATE


# -- who may heal: only a run that started after the file, never a revocation ------------------


@given(
    source=st.sampled_from([RATE, REVOKED]),
    written=st.one_of(st.none(), st.integers(-10_000, 10_000)),
    started=st.integers(-10_000, 10_000),
)
def test_a_clean_run_heals_only_a_dated_rate_limit_written_before_it_started(
    source: CapacitySource, written: int | None, started: int
) -> None:
    at = None if written is None else T + timedelta(seconds=written)
    cap = Capacity(source, None, "e", at)
    what = heal_decision(cap, T + timedelta(seconds=started))
    deletes = source is RATE and written is not None and started > written
    assert (what is Heal.DELETED) == deletes
    if source is REVOKED:
        assert what is Heal.KEPT_REVOKED


def test_heal_on_the_file(tmp_path: Path) -> None:
    path = tmp_path / "capacity.json"
    assert heal(path, T) == (Heal.NO_FILE, None)
    write_capacity(path, Capacity(RATE, None, "e", T))
    assert heal(path, T - timedelta(seconds=1))[0] is Heal.KEPT_OLDER_RUN and path.exists()
    assert heal(path, T + timedelta(seconds=1))[0] is Heal.DELETED and not path.exists()
    path.write_text("{not json", encoding="utf-8")
    what, warning = heal(path, T)
    assert what is Heal.KEPT_UNDATED and warning and path.exists()


# -- the canary ---------------------------------------------------------------------------------


def _unit(state: str = "active") -> Unit:
    return Unit(9, "w1", "agent", state, 1, T)


@pytest.mark.parametrize(
    ("cap", "units", "now", "open_"),
    [
        pytest.param(Capacity(RATE, None, "e", T), (), T + PERIOD, True, id="due-idle"),
        pytest.param(
            Capacity(RATE, None, "e", T), (), T + PERIOD - timedelta(seconds=1), False, id="early"
        ),
        pytest.param(Capacity(RATE, None, "e", T), (_unit(),), T + PERIOD, False, id="unit-live"),
        pytest.param(
            Capacity(RATE, None, "e", T), (_unit("failed"),), T + PERIOD, True, id="unit-dead"
        ),
        pytest.param(Capacity(REVOKED, None, "e", T), (), T + 9 * PERIOD, False, id="revoked"),
        pytest.param(
            Capacity(RATE, T + 9 * PERIOD, "e", T), (), T + PERIOD, False, id="stated-reset"
        ),
        pytest.param(Capacity(RATE, None, "e", None), (), T + 9 * PERIOD, False, id="undated"),
        pytest.param(
            Capacity(RATE, None, "e", T, None, T + PERIOD),
            (),
            T + PERIOD + timedelta(minutes=1),
            False,
            id="a-canary-already-went",
        ),
    ],
)
def test_canary_open(cap: Capacity, units: tuple[Unit, ...], now: datetime, open_: bool) -> None:
    assert canary_open(cap, units, now) is open_


def test_the_canary_stamp_restarts_the_period(tmp_path: Path) -> None:
    path = tmp_path / "capacity.json"
    write_capacity(path, Capacity(RATE, None, "e", T, 4))
    assert stamp_canary(path, T + PERIOD - timedelta(seconds=1)) is None  # not a canary yet
    stamped = stamp_canary(path, T + PERIOD)
    assert stamped is not None and read_capacity(path)[0] == stamped
    assert canary_due(stamped) == T + 2 * PERIOD
    write_capacity(path, Capacity(REVOKED, None, "e", T))
    assert stamp_canary(path, T + 9 * PERIOD) is None


def test_the_refusal_names_when_the_canary_may_go() -> None:
    text = describe(Capacity(RATE, None, "You've hit your limit", T), T)
    assert "one canary run allowed from" in text and (T + PERIOD).strftime("%H:%M") in text


def _canary_worker(age: timedelta):  # type: ignore[no-untyped-def]
    cap = Capacity(RATE, None, "You've hit your limit", NOW - age)
    w = worker("w1", "a")
    return replace(w, capacity=cap, canary=canary_open(cap, w.units, NOW))


def test_status_shows_the_canary_and_select_dispatches_to_it() -> None:
    snap = snapshot(issue(1), workers=[_canary_worker(PERIOD + timedelta(minutes=1))])
    plan = select(snap)
    assert [d.issue for d in plan.dispatch] == [1]
    text = render(snap, plan, None, 300, switches=Switches(None, None, None))
    row = as_json(snap, plan, None, period_s=300, switches=Switches(None, None, None))
    w1 = next(w for w in row["workers"] if w["name"] == "w1")
    assert w1["state"] == "canary" and "canary due" in w1["reason"]
    assert "canary due" in text


def test_status_says_when_the_canary_is_not_yet_due() -> None:
    snap = snapshot(issue(1), workers=[_canary_worker(timedelta(hours=1))])
    plan = select(snap)
    assert plan.dispatch == ()
    row = as_json(snap, plan, None, period_s=300, switches=Switches(None, None, None))
    w1 = next(w for w in row["workers"] if w["name"] == "w1")
    assert w1["state"] == "dark" and "one canary run allowed at" in w1["reason"]
