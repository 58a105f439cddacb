"""Cold commands against invoke itself: issue 13's goal 6.

The goal: a cold ``invoke dispatch --issue K --dry-run`` and ``invoke fleet-status`` on the
embedded default take at most 1.5x a cold ``python -c "import invoke"``. A fleet command is an
interpreter start plus invoke plus the fleet's own imports plus its work (the inventory, the board,
one probe of each local worker); the peer is the first two, so the ratio is what the fleet adds.
Two floors are measured beside them: ``invoke --list`` (invoke with the fleet's collection loaded,
nothing run) and check 8's runner test, the interpreter start a probe of local workers makes.

The fleet is a throwaway one in a temp directory, laid out as the embedded default
(``inventory.yaml``): a SQLite board and a bare origin, three local workers under the ``auto``
supervisor, a few issues filed, CI green. Its workers name this interpreter as their ``python``
(the demo's inventory does the same), so check 8's runner probe starts the interpreter under test.
Nothing depends on ``.fleet/demo``.

Rounds alternate the peer and every command, so load on the shared box lands on each; a round's
ratio is each command's wall time over the same round's peer, and the figure is the median of the
rounds' ratios. Every child gets a bytecode cache in the temp directory (``PYTHONPYCACHEPREFIX``,
``PYTHONDONTWRITEBYTECODE`` cleared), warmed by one unmeasured round: a cold command is a fresh
process, not a first compile. Each command's exit code is checked every time. Last, each command
under ``-X importtime``: its heaviest imports, so the next reader sees where the time goes.

    python bench/cold_bench.py [--rounds 10] [--before DIR]    # exits 1 when a goal is missed

``--before`` runs the same commands from another checkout (its ``tasks.py``, its ``fleet``
package) in the same rounds, so a change's before and after share the load: a worktree of main.
``--checkout`` moves the "after" side to another checkout too.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Run from a checkout without installing: the repository root holds the ``fleet`` package.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fleet import inventory_builder  # noqa: E402 (after the path line above)
from fleet.board import open_board  # noqa: E402
from fleet.core.model import CIState  # noqa: E402
from fleet.inventory import load  # noqa: E402
from fleet.observe import runner_check  # noqa: E402

GOAL = 1.5  # issue 13, goal 6: a cold command at most 1.5x a cold `import invoke`
ISSUES = 5  # a few filed issues: the board read and the plan have something to show
WORKERS = ("local", "local-2", "local-3")  # inventory.yaml's three local workers
# A cold command here takes ~1 s at worst on the busy box; this bounds a wedged one.
RUN_TIMEOUT_S = 60.0
MAX_ROUNDS = 50  # the loop's bound, whatever --rounds says
TOP_IMPORTS = 12  # modules listed per command from -X importtime
IMPORT_RUNS = 3  # -X importtime runs per command; each module's least time is shown


@dataclass(frozen=True)
class Command:
    """One measured command: its label, its argv, the checkout it runs from (its ``tasks.py`` and
    ``fleet``), and its part: ``peer``, ``goal`` (bound by the goal), ``before`` (the same command
    from the ``--before`` checkout, shown beside it) or ``floor`` (a piece every such command
    pays, shown for the reader)."""

    label: str
    argv: tuple[str, ...]
    checkout: Path
    part: str


def write_fleet(root: Path) -> Path:
    """The embedded default's fleet under ``root``, with ``ISSUES`` issues filed."""
    workers = [
        inventory_builder.local_worker(
            root,
            name,
            lane=name,
            python=sys.executable,
            agent=f"{sys.executable} -m fleet.agents.demo",
            supervisor="auto",
            path_prefix=["~/.local/bin"],
        )
        for name in WORKERS
    ]
    path = inventory_builder.write(root / "inventory.yaml", inventory_builder.under(root, workers))
    board = open_board(load(path), create=True)
    board.set_ci(CIState.GREEN)  # type: ignore[attr-defined]
    for i in range(ISSUES):
        board.create_issue(f"cold bench issue {i}", "body")
    return path


def commands(inventory: Path, checkout: Path, before: Path | None) -> tuple[Command, ...]:
    """The peer first, then the commands (and each again from ``before``), then two floors:
    invoke with the fleet's collection and nothing else run (``invoke --list``), and check 8's
    runner test, the interpreter start the probe makes on a local worker (once per interpreter:
    fleet.observe.runner_group). ``invoke`` and ``fleet`` are this interpreter's console scripts,
    called directly (a version manager's shim in front would be timed too)."""
    bindir = Path(sys.executable).parent
    invoke, fleet = str(bindir / "invoke"), str(bindir / "fleet")
    dry = ("dispatch", "--issue", "1", "--dry-run")
    measured = (
        ("invoke dispatch --issue 1 --dry-run", (invoke, *dry)),
        ("invoke fleet-status", (invoke, "fleet-status")),
        ("fleet dispatch --issue 1 --dry-run", (fleet, *dry)),
        ("fleet fleet-status", (fleet, "fleet-status")),
    )
    runner_test = tuple(shlex.split(runner_check(load(inventory).workers[0])))
    return (
        Command(
            "python -c 'import invoke'", (sys.executable, "-c", "import invoke"), checkout, "peer"
        ),
        *(Command(label, argv, checkout, "goal") for label, argv in measured),
        *(
            Command(f"before: {label}", argv, before, "before")
            for label, argv in measured
            if before is not None
        ),
        Command("floor: invoke --list", (invoke, "--list"), checkout, "floor"),
        Command("floor: check 8's runner test", runner_test, checkout, "floor"),
    )


def child_env(inventory: Path, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPYCACHEPREFIX=str(pycache), FLEET_INVENTORY=str(inventory))
    return env


def run_once(cmd: Command, env: dict[str, str]) -> float:
    """One cold run's wall time, from its checkout; a non-zero exit is the bench's failure, not a
    figure."""
    env = {**env, "PYTHONPATH": str(cmd.checkout)}
    began = time.perf_counter()
    out = subprocess.run(
        cmd.argv, cwd=cmd.checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    took = time.perf_counter() - began
    if out.returncode != 0:
        raise SystemExit(f"bench: {cmd.label} exited {out.returncode}: {out.stderr.strip()[-500:]}")
    return took


def top_imports(cmd: Command, env: dict[str, str]) -> tuple[float, list[str]]:
    """The command ``IMPORT_RUNS`` times under ``-X importtime``, each module's least own (self)
    time kept (load on the box only adds): the total, the packages summed, and the heaviest
    modules, in ms. Console scripts are Python files, so the interpreter runs them with the flag."""
    script = cmd.argv[1:] if cmd.argv[0] == sys.executable else cmd.argv
    argv = (sys.executable, "-X", "importtime", *script)
    env = {**env, "PYTHONPATH": str(cmd.checkout)}
    least: dict[str, int] = {}
    for _ in range(IMPORT_RUNS):
        out = subprocess.run(
            argv, cwd=cmd.checkout, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own_us, _cumulative, module = line.removeprefix("import time:").split("|", 2)
            # Imports racing in the probe's threads can print a negative own time: not a cost.
            own, name = max(int(own_us), 0), module.strip()
            least[name] = min(own, least.get(name, own))
    packages: dict[str, int] = {}
    for name, own in least.items():
        top = name.split(".")[0]
        packages[top] = packages.get(top, 0) + own
    by_package = sorted(((us, top) for top, us in packages.items()), reverse=True)[:TOP_IMPORTS]
    heaviest = sorted(((own, name) for name, own in least.items()), reverse=True)[:TOP_IMPORTS]
    return sum(least.values()) / 1000, [
        "by package: " + ", ".join(f"{top} {us / 1000:.0f}" for us, top in by_package),
        *(f"{own / 1000:6.1f} ms  {name}" for own, name in heaviest),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10, help=f"measured rounds (at most {MAX_ROUNDS})")
    p.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose commands run")
    p.add_argument(
        "--before",
        type=Path,
        help="another checkout (main, for a change's before) whose commands run in the same rounds",
    )
    p.add_argument("--no-imports", action="store_true", help="skip the -X importtime listing")
    args = p.parse_args(argv)
    if not 1 <= args.rounds <= MAX_ROUNDS:
        p.error(f"--rounds must be between 1 and {MAX_ROUNDS}")
    checkout = args.checkout.resolve()
    before = args.before.resolve() if args.before else None
    for tree in (checkout, before):
        if tree is not None and not (tree / "tasks.py").exists():
            p.error(f"{tree} has no tasks.py: not a checkout of fleet")
    with tempfile.TemporaryDirectory(prefix="fleet-cold-bench-") as tmp:
        root = Path(tmp).resolve()
        inventory = write_fleet(root / "fleet")
        cmds = commands(inventory, checkout, before)
        env = child_env(inventory, root / "pycache")
        for cmd in cmds:  # warm-up: the bytecode cache, the workers' state directories
            run_once(cmd, env)
        walls: dict[str, list[float]] = {c.label: [] for c in cmds}
        ratios: dict[str, list[float]] = {c.label: [] for c in cmds}
        for r in range(args.rounds):
            # Rotate the order, so no command always runs right after the same neighbour.
            order = cmds[r % len(cmds) :] + cmds[: r % len(cmds)]
            took = {c.label: run_once(c, env) for c in order}
            for c in cmds:
                walls[c.label].append(took[c.label])
                ratios[c.label].append(took[c.label] / took[cmds[0].label])
        shown = [c for c in cmds if c.part in ("peer", "goal")]
        imports = {} if args.no_imports else {c.label: top_imports(c, env) for c in shown}
        shutil.rmtree(root / "pycache", ignore_errors=True)
    load1 = os.getloadavg()[0]
    print(f"checkout {checkout}; {args.rounds} rounds; 1-minute load average {load1:.2f}")
    if before is not None:
        print(f"before: the same commands from {before}, in the same rounds")
    missed = []
    for c in cmds:
        wall = statistics.median(walls[c.label]) * 1000
        ratio = statistics.median(ratios[c.label])
        verdict = ""
        if c.part == "goal":
            ok = ratio <= GOAL
            verdict = f"  goal <= {GOAL}x: {'met' if ok else 'MISSED'}"
            if not ok:
                missed.append(c.label)
        print(f"{c.label:<46} median {wall:7.1f} ms  {ratio:5.2f}x the peer{verdict}")
    for label, (total, rows) in imports.items():
        print(
            f"\n{label}: {total:.0f} ms of imports (-X importtime, least of {IMPORT_RUNS} runs); "
            "heaviest by own time:"
        )
        for row in rows:
            print(f"  {row}")
    if missed:
        print(f"\nmissed the {GOAL}x goal: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
