"""D13's max-turns bound, through real dispatches and the real runner: a Claude agent gets its own
``--max-turns`` flag and ends itself; a Codex agent (no such flag) is counted and stopped by the
runner. Both end with the named outcome ``turn-limit``, which spends an attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.core.markers import Kind, history
from fleet.dispatch import dispatch
from fleet.inventory import InventoryError, loads
from fleet.inventory_builder import InventoryData
from fleet.runner.turns import runner_bound
from tests.integration.fleet_fixture import (
    Fleet,
    demo_agent,
    has_marker,
    make_fleet,
    wait_for,
    write_fleet_inventory,
)

pytestmark = pytest.mark.timeout(120)

MAX_TURNS = 3


def _fleet(root: Path, kind: str) -> Fleet:
    def edit(data: InventoryData, _root: Path) -> None:
        data["policy"]["max_turns"] = MAX_TURNS
        data["workers"][0]["agent"] = f"{demo_agent()} --kind {kind}"

    f = make_fleet(root, edit=edit)
    inv = f.inventory
    assert inv.policy.max_turns == MAX_TURNS and inv.workers[0].agent_kind.value == kind
    return f


@pytest.mark.parametrize(
    ("kind", "how"),
    [
        ("claude", "the agent's own max-turns flag ended the run at 3 turns"),
        ("codex", "the runner stopped the agent after"),
    ],
)
@pytest.mark.slow
def test_a_looping_agent_ends_at_the_turn_bound_with_a_named_outcome(
    tmp_path: Path, kind: str, how: str
) -> None:
    f = _fleet(tmp_path, kind)
    with f.ctx:
        n = f.board.create_issue("Loop forever", labels=["demo:loop"])
        r = dispatch(f.ctx, n)
        assert r.launched, r.line()
        issue = wait_for(f.board, n, has_marker(Kind.TURN_LIMIT))
        h = history(issue, "fleet")
        m = h.last_marker
        assert m is not None and m.kind is Kind.TURN_LIMIT and m.get("run") == r.run_id
        assert how in m.note, m.note
        assert h.attempts == 1  # a stuck task spends its attempt (D13: the attempt cap bounds it)
        assert runner_bound(f.inventory.workers[0].agent_kind, MAX_TURNS) == (
            MAX_TURNS if kind == "codex" else None
        )


def test_max_turns_is_a_positive_integer_with_its_position(tmp_path: Path) -> None:
    def zero(data: InventoryData, _root: Path) -> None:
        data["policy"]["max_turns"] = "zero"

    path = write_fleet_inventory(tmp_path.resolve(), ("w1",), edit=zero)
    text = path.read_text(encoding="utf-8")
    line, at = next((i, ln) for i, ln in enumerate(text.splitlines(), 1) if "max_turns:" in ln)
    with pytest.raises(InventoryError) as err:
        loads(text, str(path))
    where = f"{path}:{line}:{at.index('zero') + 1}"
    assert f"{where}: policy.max_turns: expected a positive integer" in str(err.value)
