"""``invoke demo``: the main job on the embedded default, end to end, on one machine.

It builds the embedded setup (a SQLite board, a bare git origin, local workers with the portable
supervisor) under ``.fleet/demo/``, files sample issues — a dependency chain, a parent with a
sub-issue, a held item, a fixture, and one issue per fault mode of the stand-in agent — then drains
them with the real sweeper (``schedule --apply``) until the fleet is idle, and prints fleet-status.

Two departures from ``inventory.yaml``, printed when the demo starts, keep it under a minute:
retry backoffs of 1 s and 2 s (production: 30 s/2 m/8 m, which must outlast the agent CLI's own
retry ladder, D7) and a 8 s run-time limit (so the hang fault ends quickly). It uses three local
workers so that the rate-limit and revoked faults each darken one box while the third keeps
draining (D8).
"""

from __future__ import annotations

import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from fleet.board import open_board
from fleet.cmd.common import context
from fleet.context import FleetContext
from fleet.idle import idle as fleet_idle
from fleet.inventory import load
from fleet.model import CIState
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.select import select
from fleet.status import read_heartbeat, render
from fleet.switches import read_switches

# The whole demo is bounded: it stops waiting after this long even if something is still live.
DEMO_DEADLINE_S = 150
TICK_S = 0.5  # a demo sweep period; production runs the sweeper on a 5-minute timer

_INVENTORY = """\
# The demo's inventory: the embedded default (local board + origin, local workers), under .fleet/demo.
board: {{kind: local, path: {d}/board.sqlite3, origin: {d}/origin.git, identity: fleet}}
lock: {{path: {d}/fleet.lock, wait_s: 30}}
halt: {{file: {d}/HALT, issue_title: HALT FLEET}}
policy:
  attempt_cap: 2           # demo: two attempts so crash/hang/garbled exhaust quickly
  retry_backoffs_s: [1, 2] # demo only: production backoffs must outlast the CLI's ~200 s ladder (D7)
  max_run_s: 8             # demo only: ends the hang fault in seconds (RuntimeMaxSec)
state_dir: {d}/state
workers:
{workers}"""

_WORKER = """\
  - name: {name}
    transport: local
    lane: {name}
    clone: {d}/workers/{name}/clone
    state_dir: {d}/workers/{name}
    python: {py}
    agent: {py} -m fleet.agents.demo
    supervisor: portable
    path_prefix: []
"""

SAMPLES: list[dict[str, object]] = [
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


def write_inventory(root: Path) -> Path:
    py = sys.executable
    workers = "".join(
        _WORKER.format(name=n, d=root, py=py) for n in ("local", "local-2", "local-3")
    )
    path = root / "inventory.yaml"
    path.write_text(_INVENTORY.format(d=root, workers=workers), encoding="utf-8")
    return path


def file_samples(ctx: FleetContext) -> dict[str, int]:
    numbers: dict[str, int] = {}
    board = ctx.board
    fixture = ctx.inventory.policy.fixture_label
    for s in SAMPLES:
        labels = list(s.get("labels", []))  # type: ignore[call-overload]
        if s.get("fixture"):
            labels.append(fixture)
        n = board.create_issue(
            str(s["title"]), f"Demo issue ({s['key']}).", labels=labels, lane=s.get("lane")
        )  # type: ignore[arg-type]
        numbers[str(s["key"])] = n
    for s in SAMPLES:
        if "blocked_by" in s:
            board.add_blocker(numbers[str(s["key"])], numbers[str(s["blocked_by"])])
        if "parent" in s:
            board.set_parent(numbers[str(s["key"])], numbers[str(s["parent"])])
    return numbers


def idle(ctx: FleetContext) -> tuple[bool, str]:
    """The demo is done when the fleet is idle by the close rule (fleet.idle: no unit live,
    nothing parked or in flight, nothing unchecked) AND nothing eligible is left to start."""
    snap = snapshot(ctx)
    verdict = fleet_idle(snap)
    planned = len(select(snap).dispatch)
    return verdict.idle and not planned, f"{verdict.line()}; {planned} eligible"


def run_demo(*, keep: bool = False, root: Path | None = None) -> int:
    root = (root or Path(".fleet/demo")).resolve()
    if root.exists() and not keep:
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    inv_path = write_inventory(root)
    print(f"demo: embedded default under {root} (inventory {inv_path})")
    print("demo: retry backoffs 1s,2s and an 8s run limit keep it short (see the inventory)")
    open_board(load(inv_path), create=True)
    with context(str(inv_path)) as ctx:
        if not keep:
            ctx.board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
            numbers = file_samples(ctx)
            print(
                f"demo: filed {len(numbers)} sample issues: "
                + ", ".join(f"#{n} {k}" for k, n in numbers.items())
            )
        started = time.monotonic()
        sweeps = 0
        while time.monotonic() - started < DEMO_DEADLINE_S:
            report = tick(ctx, apply=True)
            sweeps += 1
            launched = [r for r in report.results if r.launched]
            if launched:
                print(
                    f"demo: sweep {sweeps}: launched "
                    + ", ".join(f"#{r.issue}→{r.worker}" for r in launched)
                )
            done, why = idle(ctx)
            if done:
                print(
                    f"demo: idle after {sweeps} sweeps, {time.monotonic() - started:.1f}s ({why})"
                )
                break
            time.sleep(TICK_S)
        else:
            print(f"demo: gave up waiting after {DEMO_DEADLINE_S}s ({idle(ctx)[1]})")
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
        closed = [i for i in ctx.board.list_issues() if not i.is_open]  # type: ignore[attr-defined]
        print(
            f"\ndemo: {len(closed)} issues closed by merged PRs at "
            f"{datetime.now(UTC).isoformat(timespec='seconds')}"
        )
    return 0
