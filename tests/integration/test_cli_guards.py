"""The production CLI's promises on every task: ``--help`` (and ``-h``) prints help and writes
nothing; ``--json`` ends every exit path in exactly one JSON object, with the exit code the command
has without it. Both programs are driven: invoke's own (``invoke -r <repo>``) and ``fleet``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from invoke import Program

from fleet.cmd.cli import program as fleet_program
from fleet.cmd.collection import ns
from fleet.cmd.taskguard import asks_help, takes_json
from fleet.core.exits import Exit
from tests.integration.fleet_fixture import Fleet, make_fleet

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]  # the repository root that holds tasks.py
ALL_TASKS = sorted(ns.task_names)
JSON_TASKS = sorted(n for n in ALL_TASKS if takes_json(ns[n]))
CLI_TIMEOUT_S = 60.0


def invoke_program() -> Program:
    """invoke's own binary, built as ``invoke.main`` builds it."""
    return Program(name="Invoke", binary="inv[oke]", binary_names=["invoke", "inv"])


def run(which: str, argv: list[str]) -> int:
    """One in-process run of ``invoke`` or ``fleet``; its exit code."""
    if which == "invoke":
        prog, full = invoke_program(), ["invoke", "-r", str(ROOT), *argv]
    else:
        prog, full = fleet_program, ["fleet", *argv]
    try:
        prog.run(full)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


@pytest.fixture(scope="module")
def quiet_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = make_fleet(tmp_path_factory.mktemp("guards"))
    f.board.create_issue("real work", "body", status="Todo")
    try:
        yield f
    finally:
        f.ctx.close()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime: any write at all changes it."""
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def board_rows(f: Fleet) -> list[str]:
    with sqlite3.connect(f"file:{f.inventory.board.path}?mode=ro", uri=True) as db:
        return list(db.iterdump())


# -- --help ---------------------------------------------------------------------------------------


def test_asks_help_sees_positional_flag_and_list_values() -> None:
    assert asks_help(["--help"]) and asks_help(["x", "-h"]) and asks_help([["a", "--help"]])
    assert not asks_help(["--helpful", "h", None, 3, ["-x"]])


@pytest.mark.parametrize("name", ALL_TASKS)
def test_help_on_every_task_prints_help_and_writes_nothing(
    name: str,
    quiet_fleet: Fleet,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    f = quiet_fleet
    monkeypatch.chdir(f.root)
    monkeypatch.setenv("FLEET_INVENTORY", str(f.inventory_path))
    before_tree, before_rows = tree(f.root), board_rows(f)
    capsys.readouterr()
    for which in ("invoke", "fleet"):
        for flag in ("--help", "-h"):
            code = run(which, [name, flag])
            out = capsys.readouterr().out
            assert code == 0, f"{which} {name} {flag}: exit {code}"
            assert f"{name} [" in out.splitlines()[0] and "Usage:" in out, f"{which} {name} {flag}"
            assert tree(f.root) == before_tree, f"{which} {name} {flag} wrote a file"
            assert board_rows(f) == before_rows, f"{which} {name} {flag} wrote to the board"


@pytest.mark.parametrize(
    "argv",
    [
        ["board.add", "a title", "--body", "--help"],
        ["board.label", "1", "--label", "hold", "--label", "-h"],
        ["dispatch", "--issue", "--help"],
        ["board.comment", "1", "-h"],
    ],
    ids=["flag-value", "list-item", "value-flag", "second-positional"],
)
def test_help_given_as_a_flags_value_is_help_too(
    argv: list[str], quiet_fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    f = quiet_fleet
    before = board_rows(f)
    assert run("fleet", [*argv, "--inventory", str(f.inventory_path)]) == 0
    assert "Usage:" in capsys.readouterr().out
    assert board_rows(f) == before


def test_the_real_binaries_file_nothing_on_help(quiet_fleet: Fleet) -> None:
    """The console scripts themselves, in their own processes (what an operator types)."""
    f = quiet_fleet
    bindir = Path(sys.executable).parent
    before = board_rows(f)
    env = {**os.environ, "FLEET_INVENTORY": str(f.inventory_path)}
    for argv in (
        [str(bindir / "invoke"), "-r", str(ROOT), "board.add", "--help"],
        [str(bindir / "fleet"), "pr.merge", "-h"],
        [str(bindir / "fleet"), "halt", "--help"],
    ):
        if not Path(argv[0]).exists():
            argv[0] = shutil.which(Path(argv[0]).name) or argv[0]
        p = subprocess.run(
            argv, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=f.root, env=env
        )
        assert p.returncode == 0 and "Usage:" in p.stdout, (argv, p.stdout, p.stderr)
    assert board_rows(f) == before
    assert not Path(f.inventory.halt.file).exists()


# -- --json ---------------------------------------------------------------------------------------

# The positional values each --json command needs: issue 99 does not exist (a refusal).
NEEDS = {"dispatch": ["--issue", "99"], "cancel": ["--issue", "99"], "board.show": ["99"]}


def _argv(name: str, trace: Path) -> list[str]:
    if name == "replay":
        return [name, str(trace)]
    positional = [a for a in ns[name].get_arguments() if a.positional]
    assert not positional or name in NEEDS, f"{name} takes --json: give its arguments in NEEDS"
    return [name, *NEEDS.get(name, [])]


def json_lines(out: str) -> list[object]:
    found = []
    for line in out.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def check_json_path(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, object]]:
    """Run without and with --json; same exit code, one JSON object, and it is the last line."""
    capsys.readouterr()
    plain = run("fleet", argv)
    capsys.readouterr()
    code = run("fleet", [*argv, "--json"])
    out = capsys.readouterr().out
    assert code == plain, f"{argv}: exit {code} with --json, {plain} without"
    lines = [ln for ln in out.splitlines() if ln.strip()]
    objs = [o for o in json_lines(out) if isinstance(o, dict)]
    assert len(objs) == 1, f"{argv}: {len(objs)} JSON objects in {out!r}"
    last = json.loads(lines[-1])
    assert isinstance(last, dict), f"{argv}: the last line is not a JSON object: {out!r}"
    if last.get("outcome") == "error":
        assert last["code"] == code
    return code, last


def test_every_json_command_is_known() -> None:
    """The set this file drives; a new --json command joins it by itself."""
    assert {"dispatch", "schedule", "fleet-status", "cancel", "replay"} <= set(JSON_TASKS)


@pytest.mark.parametrize("name", JSON_TASKS)
def test_json_on_every_failure_path(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = make_fleet(tmp_path)
    try:
        trace = tmp_path / "no-such-trace.jsonl"
        argv = _argv(name, trace)
        if name == "replay":  # takes no inventory: its failure is the trace
            code, obj = check_json_path(argv, capsys)
            assert code == Exit.TRACE_UNREADABLE and obj["code_name"] == "TRACE_UNREADABLE"
            return
        # a bad inventory (positioned error, exit 3)
        bad = tmp_path / "bad.yaml"
        bad.write_text("board:\n  kind: local\n  pathh: x\n", encoding="utf-8")
        code, obj = check_json_path([*argv, "--inventory", str(bad)], capsys)
        assert code == Exit.INVENTORY and obj["code_name"] == "INVENTORY"
        assert "bad.yaml:3:3" in str(obj["error"])
        # an unreadable board
        garbage = tmp_path / "garbage.sqlite3"
        garbage.write_text("not a database\n", encoding="utf-8")
        text = f.inventory_path.read_text(encoding="utf-8")
        unreadable = tmp_path / "unreadable.yaml"
        unreadable.write_text(
            text.replace(str(f.inventory.board.path), str(garbage)), encoding="utf-8"
        )
        code, obj = check_json_path([*argv, "--inventory", str(unreadable)], capsys)
        if name in ("dispatch", "board.show", "board.list"):
            assert code == Exit.BOARD_UNREADABLE, obj
        # the ordinary path: a refusal for the commands that name an issue (99 does not exist)
        code, obj = check_json_path([*argv, "--inventory", str(f.inventory_path)], capsys)
        if name in NEEDS:
            assert code == Exit.ISSUE_MISSING, obj
    finally:
        f.ctx.close()


def test_dispatch_json_against_an_unopenable_board_is_one_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's own example: no board file at all (never created) is exit 50 and an object."""
    f = make_fleet(tmp_path)
    f.ctx.close()
    Path(str(f.inventory.board.path)).unlink()
    code, obj = check_json_path(
        ["dispatch", "--issue", "1", "--inventory", str(f.inventory_path)], capsys
    )
    assert code == Exit.BOARD_UNREADABLE
    assert obj["outcome"] == "error" and obj["code_name"] == "BOARD_UNREADABLE"
    assert "board unreadable" in str(obj["error"])
