"""``invoke demo --agent KIND``: every agent kind drains the sample board to the same end states.

The stand-in agent speaks each CLI's output (``--kind``) and the worker's adapter is detected from
the command, so this is the whole path — sweeper, dispatch, unit, runner, the kind's adapter, the
close-out — per kind. Where a CLI documents no limit text (Codex, Gemini, plain), the limit and
revocation faults end as failures instead of capacity outcomes, yet every issue ends where the
default demo's does: a failure spends one attempt and the ``demo:once`` retry does the work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.cmd.common import context
from fleet.core.select import select
from fleet.demo import AGENTS, SAMPLES, run_demo
from fleet.observe import snapshot

pytestmark = pytest.mark.timeout(400)

CLOSED = "closed"
# sample key -> how it ends: closed by a merged PR, or the state select names it by
END_STATES = {
    "plain": CLOSED,
    "chain-a": CLOSED,
    "chain-b": CLOSED,
    "parent": CLOSED,
    "child": CLOSED,
    "held": "held",
    "fixture": "fixture",
    "rate": CLOSED,
    "revoked": CLOSED,
    "transient": CLOSED,
    "crash": "exhausted",
    "hang": "exhausted",
    "noop": "latched",
    "pr-open": "latched",
    "blocker": "latched",
}


def end_states(inventory: Path) -> dict[str, str]:
    with context(str(inventory)) as ctx:
        snap = snapshot(ctx)
        waiting = {w.issue: w.state for w in select(snap).waiting}
        keys = {f"Demo issue ({s['key']}).": str(s["key"]) for s in SAMPLES}
        return {
            keys[i.body]: CLOSED if not i.is_open else waiting.get(i.number, "eligible")
            for i in ctx.board.list_issues()  # type: ignore[attr-defined]
            if i.body in keys
        }


# The default kind drains in `invoke test`; every other kind's drain (each ~40 s) runs in
# `invoke stress`, which CI runs too.
@pytest.mark.parametrize(
    "agent", [a if a == "claude" else pytest.param(a, marks=pytest.mark.stress) for a in AGENTS]
)
@pytest.mark.slow
def test_every_agent_kind_drains_the_sample_board_to_the_same_end_states(
    tmp_path: Path, agent: str
) -> None:
    root = tmp_path / ".fleet" / "demo"
    assert run_demo(root=root, agent=agent) == 0
    assert end_states(root / "inventory.yaml") == END_STATES
