"""``invoke demo``: the main job on the embedded default, end to end, on one machine.

It builds the embedded setup (a SQLite board, a bare git origin, three local workers) under
``.fleet/demo/``, files sample issues — a dependency chain, a parent with a sub-issue, a held item, a
fixture, and one issue per fault mode of the stand-in agent — then drains them with the real sweeper
(``schedule --apply``) until the fleet is idle, prints fleet-status, and writes the timeline of its
run (``invoke timeline``'s page) and prints its path.

**The demo's fleet is the embedded default's.** The committed ``inventory.yaml`` names the same board,
origin, lock, halt file, state directory and workers under ``.fleet/demo/``, so the commands a
newcomer types next — ``fleet-status``, ``timeline``, ``board.list``, ``schedule`` — show the demo's
fleet without a flag (``tests/unit/test_demo_inventory.py`` holds the two files to that). The demo
writes its own copy (absolute paths) only for two departures that bound runs in flight, printed when
it starts: retry backoffs of 1 s and 2 s (production: 30 s/2 m/8 m, which must outlast the agent
CLI's own retry ladder, D7) and an 8 s run-time limit (so the hang fault ends quickly); and it runs
the workers with this Python, so they import this checkout. Starting afresh removes ``.fleet/demo``,
which is why it refuses when that board holds issues the demo did not file.
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Required, TypedDict

from fleet import inventory_builder
from fleet.board import open_board
from fleet.cmd.common import context
from fleet.context import FleetContext
from fleet.control.switches import read_switches
from fleet.core.idle import idle as fleet_idle
from fleet.core.model import CIState
from fleet.core.select import select
from fleet.inventory import load
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.timeline.write import draw
from fleet.views.progress import Meter
from fleet.views.status import read_heartbeat, render

# The whole demo is bounded: it stops waiting after this long even if something is still live.
DEMO_DEADLINE_S = 150
TICK_S = 0.5  # a demo sweep period; production runs the sweeper on a 5-minute timer
WORKERS = ("local", "local-2", "local-3")  # inventory.yaml's workers, in its order
DEMO_BODY = "Demo issue ("  # how every sample's body begins: the demo's own issues, and no others

# The demo's policy: inventory.yaml's attempt cap (so fleet-status after the demo says what the demo
# saw) and the two departures, each a bound on runs in flight.
_POLICY = {
    "attempt_cap": 3,
    "retry_backoffs_s": [1, 2],  # production backoffs must outlast the CLI's ~200 s ladder (D7)
    "max_run_s": 8,  # ends the hang fault in seconds (RuntimeMaxSec)
}
_HEADER = """\
The demo's inventory (fleet.demo, built by fleet.inventory_builder): the embedded default's fleet
(inventory.yaml) with absolute paths and two departures, demo only: retry backoffs of 1 s and 2 s
(production's must outlast the agent CLI's ~200 s retry ladder, D7) and an 8 s run limit (ends the
hang fault in seconds). The workers run this checkout's Python."""


class Sample(TypedDict, total=False):
    """One issue the demo files."""

    key: Required[str]
    title: Required[str]
    labels: list[str]
    lane: str  # the box it must run on
    fixture: bool  # carries the policy's fixture label
    blocked_by: str  # the key of the sample that blocks it
    parent: str  # the key of its parent sample


SAMPLES: list[Sample] = [
    {"key": "plain", "title": "Add a greeting to the README"},
    {"key": "chain-a", "title": "Write the config loader"},
    {"key": "chain-b", "title": "Use the config loader", "blocked_by": "chain-a"},
    {"key": "parent", "title": "Documentation (grouper)"},
    {"key": "child", "title": "Write the getting-started page", "parent": "parent"},
    {"key": "held", "title": "Redesign the logo", "labels": ["hold"]},
    {"key": "fixture", "title": "Probe: throwaway", "fixture": True},
    {
        "key": "rate",
        "title": "Fault: rate limit",
        "labels": ["demo:rate-limit", "demo:once"],
        "lane": "local-2",
    },
    {
        "key": "revoked",
        "title": "Fault: revoked",
        "labels": ["demo:revoked", "demo:once"],
        "lane": "local-3",
    },
    {
        "key": "transient",
        "title": "Fault: transient error",
        "labels": ["demo:transient", "demo:once"],
    },
    {"key": "crash", "title": "Fault: crash", "labels": ["demo:crash"]},
    {"key": "hang", "title": "Fault: hang", "labels": ["demo:hang"]},
    {"key": "noop", "title": "Fault: no-op", "labels": ["demo:no-op"]},
    {"key": "pr-open", "title": "Fault: PR left open", "labels": ["demo:pr-open"]},
    {"key": "blocker", "title": "Fault: declared blocker", "labels": ["demo:blocker"]},
]


AGENTS = ("claude", "codex", "gemini", "plain")  # the kinds the stand-in agent speaks (--kind)


def write_inventory(root: Path, agent: str = "claude") -> Path:
    """The demo's inventory; ``agent`` is the CLI kind the stand-in speaks (the adapter is detected
    from its ``--kind``, docs/agents.md)."""
    py = sys.executable
    kind = "" if agent == "claude" else f" --kind {agent}"
    workers = [
        inventory_builder.local_worker(
            root,
            name,
            lane=name,
            python=py,
            agent=f"{py} -m fleet.agents.demo{kind}",
            supervisor="auto",
            path_prefix=["~/.local/bin"],
        )
        for name in WORKERS
    ]
    data = inventory_builder.under(root, workers, policy=_POLICY)
    return inventory_builder.write(root / "inventory.yaml", data, header=_HEADER)


def file_samples(ctx: FleetContext) -> dict[str, int]:
    numbers: dict[str, int] = {}
    board = ctx.board
    fixture = ctx.inventory.policy.fixture_label
    for s in SAMPLES:
        labels = list(s.get("labels", []))
        if s.get("fixture"):
            labels.append(fixture)
        n = board.create_issue(
            str(s["title"]), f"{DEMO_BODY}{s['key']}).", labels=labels, lane=s.get("lane")
        )
        numbers[str(s["key"])] = n
    for s in SAMPLES:
        if "blocked_by" in s:
            board.add_blocker(numbers[str(s["key"])], numbers[str(s["blocked_by"])])
        if "parent" in s:
            board.set_parent(numbers[str(s["key"])], numbers[str(s["parent"])])
    return numbers


def idle(ctx: FleetContext) -> tuple[bool, str]:
    """The demo is done when the fleet is idle by the close rule (fleet.core.idle: no unit live,
    nothing parked or in flight, nothing unchecked) AND nothing eligible is left to start."""
    snap = snapshot(ctx)
    verdict = fleet_idle(snap)
    planned = len(select(snap).dispatch)
    return verdict.idle and not planned, f"{verdict.line()}; {planned} eligible"


class DemoRefused(RuntimeError):
    """Starting afresh would delete issues the demo did not file."""


def foreign_issues(root: Path) -> list[int]:
    """Issues on the board under ``root`` that the demo did not file (a newcomer's own work)."""
    path = root / "board.sqlite3"
    if not path.exists():
        return []
    from fleet.board.local import LocalBoard

    board = LocalBoard(path, root / "origin.git")
    try:
        return [i.number for i in board.list_issues() if not i.body.startswith(DEMO_BODY)]
    finally:
        board.disconnect()


def fresh(root: Path) -> None:
    """Remove the last run's fleet, unless its board holds someone's own issues."""
    if not root.exists():
        return
    mine = foreign_issues(root)
    if mine:
        listed = ", ".join(f"#{n}" for n in mine[:10]) + (" ..." if len(mine) > 10 else "")
        raise DemoRefused(
            f"demo: the embedded default's board {root / 'board.sqlite3'} holds issues the demo "
            f"did not file ({listed}); starting afresh would delete them. Run `invoke demo --keep`, "
            f"or move {root} aside first"
        )
    shutil.rmtree(root)


def _closed(ctx: FleetContext) -> int:
    # The demo's board is always the embedded one; the Board Protocol has no list_issues.
    return len([i for i in ctx.board.list_issues() if not i.is_open])  # type: ignore[attr-defined]


def drain_demo(ctx: FleetContext, filed: int) -> int:
    """Sweep until idle (or the deadline), showing issues closed of filed and the current sweep."""
    started = time.monotonic()
    sweeps = 0
    with Meter("demo: drain (issues closed of filed)", total=filed) as meter:
        while time.monotonic() - started < DEMO_DEADLINE_S:
            report = tick(ctx, apply=True)
            sweeps += 1
            launched = [r for r in report.results if r.launched]
            if launched:
                meter.line(
                    f"demo: sweep {sweeps}: launched "
                    + ", ".join(f"#{r.issue}→{r.worker}" for r in launched)
                )
            done, why = idle(ctx)
            meter.update(_closed(ctx), f"sweep {sweeps}: {report.outcome}; {why}")
            if done:
                meter.line(
                    f"demo: idle after {sweeps} sweeps, {time.monotonic() - started:.1f}s ({why})"
                )
                return sweeps
            time.sleep(TICK_S)
    print(f"demo: gave up waiting after {DEMO_DEADLINE_S}s ({idle(ctx)[1]})")
    return sweeps


def write_demo_timeline(ctx: FleetContext, started: datetime) -> Path:
    """The timeline of this run, drawn by ``invoke timeline``'s own code, in the state dir."""
    now = datetime.now(UTC)
    span = now - started + timedelta(seconds=5)
    _tl, page = draw(
        ctx.inventory,
        ctx.board,
        now=now,
        span=span,
        warn=ctx.warn,
        title="fleet timeline: invoke demo",
    )
    return page


def run_demo(*, keep: bool = False, root: Path | None = None, agent: str = "claude") -> int:
    if agent not in AGENTS:
        raise DemoRefused(f"demo: --agent {agent!r}: expected one of {', '.join(AGENTS)}")
    root = (root or Path(".fleet/demo")).resolve()
    if not keep:
        fresh(root)
    root.mkdir(parents=True, exist_ok=True)
    inv_path = write_inventory(root, agent)
    began = datetime.now(UTC)
    print(f"demo: embedded default under {root} (inventory {inv_path}), agent kind {agent}")
    print("demo: retry backoffs 1s,2s and an 8s run limit keep it short (see the inventory)")
    open_board(load(inv_path), create=True)
    with context(str(inv_path)) as ctx:
        numbers: dict[str, int] = {}
        if not keep:
            ctx.board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
            numbers = file_samples(ctx)
            print(
                f"demo: filed {len(numbers)} sample issues: "
                + ", ".join(f"#{n} {k}" for k, n in numbers.items())
            )
        filed = len(numbers) or len(ctx.board.list_issues())  # type: ignore[attr-defined]
        drain_demo(ctx, filed)
        snap = snapshot(ctx)
        print()
        print(
            render(
                snap,
                select(snap),
                read_heartbeat(Path(ctx.inventory.state_dir)),
                ctx.inventory.policy.timer_period_s,
                switches=read_switches(ctx.inventory),
            )
        )
        print(
            f"\ndemo: {_closed(ctx)} issues closed by merged PRs at "
            f"{datetime.now(UTC).isoformat(timespec='seconds')}"
        )
        page = write_demo_timeline(ctx, began)
    print(f"demo: timeline of this run: {page}")
    print(
        "demo: the embedded default (inventory.yaml) is this fleet: `invoke fleet-status`, "
        "`invoke timeline --png`, `invoke board.list`, `invoke schedule` show it as it is now"
    )
    return 0
