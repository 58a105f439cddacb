"""The agent's reach (issue 16): what an agent, or a prompt injected into one, can do to the fleet
through the text it writes and the files it can touch, each attack run through the production path
(a real runner process, the real SQLite board, a real bare origin)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest

from fleet.core.exits import Exit, RunExit
from fleet.core.markers import Kind
from fleet.core.model import IssueState
from tests.contract import push_branch
from tests.integration.fleet_fixture import fleet_at, markers, refuses, run_runner, worker

pytestmark = pytest.mark.timeout(120)

HUGE = "9" * 5000  # past Python's int-from-string limit (4,300 digits): int() raises ValueError
WIDE = "99999999999999999999"  # past SQLite's 64-bit integer: binding it raises OverflowError


# -- crafted closing references ------------------------------------------------------------------


def test_a_pr_body_with_a_5000_digit_reference_does_not_break_later_close_outs(tmp_path) -> None:
    """Before the bound, every later close-out raised ValueError while scanning PR bodies: exit 74,
    no terminal marker, the worktree never released."""
    with fleet_at(tmp_path) as f:
        victim = f.board.create_issue("Add a greeting", "body")
        origin = f.inventory.board.origin
        push_branch(origin, "evil", {"evil.txt": "x\n"}, tmp_path / "push")
        f.board.create_pr("evil", "evil", f"fixes #{HUGE}")  # type: ignore[attr-defined]

        res = run_runner(f, victim, "r1")

        assert res.returncode == RunExit.OK, res.stderr
        assert markers(f, victim) == [Kind.START, Kind.SUCCESS]
        assert list((f.root / "workers" / "w1" / "worktrees").iterdir()) == []


def test_a_reference_past_sqlite_integers_does_not_crash_the_merge_after_main_moved(
    tmp_path,
) -> None:
    """Before the bound, merge_pr moved main and then raised OverflowError closing '#<20 digits>'."""
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("real", "body")
        origin = f.inventory.board.origin
        push_branch(origin, "feature", {"f.txt": "x\n"}, tmp_path / "push")
        pr = f.board.create_pr(  # type: ignore[attr-defined]
            "feature", "feature", f"fixes #{WIDE}\nfixes #{n}"
        )
        before = git.Repo(origin).commit("main").hexsha

        merged = f.board.merge_pr(pr.number)  # type: ignore[attr-defined]

        assert merged.merged
        assert git.Repo(origin).commit("main").parents[0].hexsha == before
        issue = f.board.issue(n)
        assert issue is not None and issue.state is IssueState.CLOSED


# -- the shared clone's .git/config ----------------------------------------------------------------


def test_an_agent_that_points_the_shared_clone_elsewhere_redirects_no_later_run(tmp_path) -> None:
    """The agent's worktree shares the clone's config: one ``git remote set-url`` and, before the
    check, every later run on the worker started from (and pushed to) the agent's remote."""
    evil = tmp_path.resolve() / "evil.git"
    agent = f"git remote set-url origin {evil} && echo redirected"
    with fleet_at(tmp_path, agent=agent) as f:
        origin = f.inventory.board.origin
        subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(evil)], check=True)
        first = f.board.create_issue("first", "body")
        run_runner(f, first, "r1")  # the agent's run: it rewrites origin, then ends
        clone = worker(f).clone
        assert git.Repo(clone).remote("origin").url == str(evil)
        second = f.board.create_issue("second", "body")

        line = refuses(f, second, Exit.CLONE_FOREIGN_ORIGIN, 9, worker="w1")
        assert str(evil) in line and str(origin) in line

        # A runner started anyway (a hand dispatch raced the edit) re-checks before it fetches.
        res = run_runner(f, second, "r2")
        assert res.returncode == RunExit.FAILED, res.stderr
        assert markers(f, second) == [Kind.START, Kind.FAILED]
        issue = f.board.issue(second)
        assert issue is not None and "foreign-origin" in issue.comments[-1].body


# -- the embedded board: the agent cannot write the outcome ---------------------------------------

FORGER = """
import json, os, sqlite3, subprocess, sys
board, origin, how = json.load(open(sys.argv[1]))
tip = subprocess.run(["git", "-C", origin, "rev-parse", "main"], capture_output=True,
                     text=True).stdout.strip()
commit = {"none": None, "tip": tip, "bogus": "ab" * 20}[how]
stamp = "2099-01-01T00:00:00.000000+00:00"
with sqlite3.connect(board) as db:
    db.execute(
        "INSERT INTO pull_requests(title, body, branch, repository, author, state, created_at,"
        " merged_at, merged_by, merge_commit) VALUES (?, ?, 'main', '', 'agent', 'merged', ?, ?,"
        " 'agent', ?)",
        ("done", "Closes #" + os.environ["FLEET_ISSUE"], stamp, stamp, commit),
    )
print('{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"merged"}')
"""


@pytest.mark.parametrize("how", ["none", "tip", "bogus"])
def test_a_pr_row_forged_merged_on_the_board_is_not_a_success(tmp_path, how: str) -> None:
    """An agent that found the board file (a shared unix user can: docs/security.md) inserted a
    merged PR closing its issue; before the origin check the close-out posted success with main
    untouched. Whatever merge commit the row names — none, main's own tip, one that does not
    exist — origin does not show main moving to it during the run."""
    script, config = tmp_path / "forger.py", tmp_path / "forger.json"
    script.write_text(FORGER, encoding="utf-8")
    with fleet_at(tmp_path, agent=f"{sys.executable} {script} {config}") as f:
        origin = f.inventory.board.origin
        config.write_text(json.dumps([str(f.inventory.board.path), str(origin), how]))
        n = f.board.create_issue("Add a greeting", "body")
        before = git.Repo(origin).commit("main").hexsha

        res = run_runner(f, n, "r1")

        assert git.Repo(origin).commit("main").hexsha == before  # main untouched
        assert res.returncode == RunExit.FAILED, res.stderr
        assert markers(f, n) == [Kind.START, Kind.FAILED]
        issue = f.board.issue(n)
        assert issue is not None
        last = issue.comments[-1].body
        assert "merge=unproven" in last.splitlines()[0] and "merge-unproven" in last


def test_the_agent_environment_names_no_board_origin_or_inventory(tmp_path) -> None:
    dump, script = tmp_path.resolve() / "agent-env.json", tmp_path / "dump.py"
    script.write_text(f"import json, os\njson.dump(dict(os.environ), open({str(dump)!r}, 'w'))\n")
    agent = f"{sys.executable} {script}"
    token = tmp_path.resolve() / "agent-token"
    token.write_text("ghp_agents_own\n")
    extra = {"agent_token_file": str(token)}
    with fleet_at(tmp_path, agent=agent, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        board = str(f.inventory.board.path)
        res = run_runner(f, n, "r1", env={"GH_TOKEN": "ghp_runners"})
        assert res.returncode in (RunExit.OK, RunExit.FAILED), res.stderr
        env = json.loads(dump.read_text(encoding="utf-8"))
    for name in ("FLEET_BOARD_PATH", "FLEET_ORIGIN", "FLEET_INVENTORY"):
        assert name not in env
    assert not any(board in v or str(f.inventory_path) in v for v in env.values())
    assert env["FLEET_ISSUE"] == str(n) and Path(env["FLEET_FORGE"]).name == "s"
    assert env["GH_TOKEN"] == "ghp_agents_own"  # its own credential (agent_token_file), not ours
