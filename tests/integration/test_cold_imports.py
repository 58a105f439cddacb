"""What a cold process imports: only what its path uses (issue 13, goal 6).

A cold ``fleet-status`` or ``dispatch --dry-run`` on the embedded default is measured against
``import invoke`` (bench/cold_bench.py); the libraries below are each for a path these commands do
not take on a local board with local workers: SSH (fabric, paramiko), the GitHub board (httpx),
the timeline's PNG (matplotlib), the local forge's merges (GitPython), editing the inventory
(ruamel.yaml), a redrawn view (rich), taking the fleet lock (portalocker). Each process here is a
fresh interpreter, and the test reads its ``sys.modules`` as it exits: a behaviour, not a timing.
The worker side (``python -m fleet.units``), started for every claim and probe on a worker, must
stay as light.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet import inventory_builder
from fleet.board import open_board
from fleet.inventory import load

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]  # the repository root that holds tasks.py
HEAVY = ("fabric", "paramiko", "httpx", "matplotlib", "git", "ruamel", "rich", "portalocker")
# Runs a program to its exit, then writes which of the packages named in argv it had imported.
PROBE = """
import atexit, json, sys
out, heavy, which, args = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4:]
loaded = lambda: sorted({m.split(".")[0] for m in sys.modules} & set(heavy))
atexit.register(lambda: open(out, "w").write(json.dumps(loaded())))
if which == "invoke":
    from invoke.main import program
else:
    from fleet.cmd.cli import program
program.run([which, *args])
"""


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded default's layout (a SQLite board, a bare origin, two local workers running
    this interpreter) with one issue filed; returns its inventory."""
    root = tmp_path_factory.mktemp("cold")
    workers = [
        inventory_builder.local_worker(
            root, name, python=sys.executable, supervisor="portable", path_prefix=[]
        )
        for name in ("local", "local-2")
    ]
    path = inventory_builder.write(root / "inventory.yaml", inventory_builder.under(root, workers))
    board = open_board(load(path), create=True)
    board.create_issue("cold imports", "body")
    return path


def imported(tmp_path: Path, which: str, args: list[str], inventory: Path) -> list[str]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLEET_INVENTORY": str(inventory)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), ",".join(HEAVY), which, *args],
        cwd=ROOT,  # invoke finds the repository's tasks.py here
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(out.read_text())
    return loaded


@pytest.mark.parametrize("which", ["invoke", "fleet"])
@pytest.mark.parametrize(
    "args",
    [["fleet-status"], ["fleet-status", "--json"], ["dispatch", "--issue", "1", "--dry-run"]],
)
def test_a_cold_command_on_the_embedded_default_imports_none_of_the_heavy_libraries(
    tmp_path: Path, embedded: Path, which: str, args: list[str]
) -> None:
    assert imported(tmp_path, which, args, embedded) == []


def test_the_worker_side_starts_without_the_heavy_libraries() -> None:
    """Every claim and probe starts an interpreter on the worker: it must stay light."""
    code = (
        "import sys, fleet.units.__main__; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "[]", out.stderr


def cached_modules(prefix: Path) -> set[str]:
    """The fleet modules whose bytecode a run left under ``prefix`` (``PYTHONPYCACHEPREFIX``)."""
    return {p.name.split(".")[0] for p in prefix.rglob("*.pyc") if "fleet" in p.parts}


@pytest.mark.parametrize("which", ["invoke", "fleet"])
@pytest.mark.parametrize("interpreter_says", ["write", "dont-write"])
def test_a_command_keeps_the_packages_bytecode_unless_the_interpreter_is_told_not_to(
    tmp_path: Path, embedded: Path, which: str, interpreter_says: str
) -> None:
    """invoke turns bytecode writing off for its whole process; the package must not be compiled
    again on every command (a third of a cold one), and -B / PYTHONDONTWRITEBYTECODE still rule."""
    prefix = tmp_path / "pycache"
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
    }
    env.update(PYTHONPYCACHEPREFIX=str(prefix), PYTHONPATH=str(ROOT), FLEET_INVENTORY=str(embedded))
    if interpreter_says == "dont-write":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    runner = (
        "from invoke.main import program"
        if which == "invoke"
        else ("from fleet.cmd.cli import program")
    )
    proc = subprocess.run(
        [sys.executable, "-c", f"{runner}; program.run([{which!r}, 'fleet-status'])"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr
    cached = cached_modules(prefix)
    if interpreter_says == "write":
        # the collection's modules and the ones the task imported after invoke turned writing off
        assert {"collection", "status", "model"} <= cached
    else:
        assert cached == set()
