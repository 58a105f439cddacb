"""The demo agent against a real SQLite board, a real bare origin and a real detached worktree.

Each run goes through the same pure decisions the runner uses (the kind's adapter -> capacity ->
retry -> outcome), on the agent's merged stdout+stderr capture, so these tests pin what the runner
will see. The fault matrix runs once per agent kind (``--kind``): every CLI's failures, each
named as that CLI's adapter reads it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet.agentkinds import AgentKind, AgentReport
from fleet.core.model import CapacitySource, IssueState, PRState
from fleet.runner.brief import read_results
from fleet.runner.capacity import LimitSignal
from fleet.runner.closeout import decide_close_out
from fleet.runner.envelope import CaptureKind
from fleet.runner.forge_gate import ForgeGate
from fleet.runner.outcome import Outcome, OutcomeDecision

local = pytest.importorskip("fleet.board.local", reason="fleet.board.local not available yet")

ROOT = Path(__file__).resolve().parents[2]
AGENT_TIMEOUT_S = 60  # one demo run is a few git commands (~1 s); this bounds a wedged one
BACKOFFS = (30, 120, 480)


@dataclass
class Fleet:
    board: local.LocalBoard
    board_path: Path
    origin: Path
    clone: Path
    tmp: Path


@dataclass(frozen=True)
class Result:
    exit_code: int
    output: str
    capture: AgentReport
    outcome: OutcomeDecision
    results: Path
    limit: LimitSignal | None
    clean: bool


@pytest.fixture
def fleet(tmp_path: Path):
    tmp = tmp_path.resolve()  # D10: the worktree pointer is written from the physical path
    board_path, origin, clone = tmp / "board.sqlite", tmp / "origin.git", tmp / "clone"
    board = local.LocalBoard.create(board_path, origin)
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    yield Fleet(board, board_path, origin, clone, tmp)
    board.disconnect()


def _env(
    fleet: Fleet, issue: int, run_id: str, results: Path, brief: Path, gate: Path
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        FLEET_ISSUE=str(issue),
        FLEET_FORGE=str(gate),  # the runner's gate, as a run serves it: no board path
        FLEET_RESULTS=str(results),
        FLEET_RUN_ID=run_id,
        FLEET_BRIEF=str(brief),
        FLEET_DEMO_HANG_S="30",
    )
    return env


def _worktree(fleet: Fleet, run_id: str) -> Path:
    wt = fleet.tmp / "wt" / run_id
    git = ["git", "-C", str(fleet.clone)]
    subprocess.run([*git, "fetch", "-q", "origin"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", "--detach", str(wt), "origin/main"], check=True)
    return wt


def run_agent(fleet: Fleet, issue: int, run_id: str, kind: AgentKind = AgentKind.CLAUDE) -> Result:
    """Run the agent the way the runner does (cwd = worktree, stderr merged) and decide."""
    wt = _worktree(fleet, run_id)
    results, brief = fleet.tmp / f"results-{run_id}.json", fleet.tmp / f"brief-{run_id}.md"
    brief.write_text("brief-version: 1\n")
    started = datetime.now(UTC)
    with ForgeGate(fleet.board, issue, "agent").serving() as gate:
        proc = subprocess.run(
            [sys.executable, "-m", "fleet.agents.demo", "--kind", kind.value],
            cwd=wt,
            env=_env(fleet, issue, run_id, results, brief, gate),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=AGENT_TIMEOUT_S,
        )
    # The runner's own step-8 decision, not a copy of its pipeline (D15).
    out = decide_close_out(
        output=proc.stdout,
        prs=fleet.board.pull_requests_closing(issue),
        forge_error=None,
        run_started_at=started,
        exit_code=proc.returncode,
        signal_name=None,
        timed_out=False,
        workspace_failure=None,
        retries_so_far=0,
        backoffs_s=BACKOFFS,
        results=read_results(results)[0],
        now=datetime.now(UTC),
        agent=kind,
    )
    return Result(
        proc.returncode, proc.stdout, out.report, out.decision, results, out.limit,
        out.clean(proc.returncode),
    )  # fmt: skip


def test_default_mode_merges_a_pr_that_closes_the_issue(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Write the demo note")
    r = run_agent(fleet, n, "r1")
    assert r.exit_code == 0, r.output
    assert r.capture.kind is CaptureKind.ENVELOPE
    assert r.capture.turns is not None and r.capture.turns >= 1 and not r.capture.is_error
    assert r.outcome.outcome is Outcome.SUCCESS, r.outcome.detail
    (pr,) = fleet.board.pull_requests_closing(n)
    assert pr.merged and pr.branch == f"fleet/issue-{n}-r1" and f"Closes #{n}" in pr.body
    issue = fleet.board.issue(n)
    assert issue is not None and issue.state is IssueState.CLOSED
    shown = subprocess.run(
        ["git", "-C", str(fleet.origin), "show", f"main:notes/issue-{n}.md"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "run r1" in shown.stdout
    assert r.clean


def test_pr_open_mode_leaves_the_pr_and_the_issue_open(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Open only", labels=["demo:pr-open"])
    r = run_agent(fleet, n, "r2")
    assert r.exit_code == 0, r.output
    assert r.outcome.outcome is Outcome.PR_OPEN
    (pr,) = fleet.board.pull_requests_closing(n)
    assert pr.state is PRState.OPEN and not pr.merged
    issue = fleet.board.issue(n)
    assert issue is not None and issue.state is IssueState.OPEN


def test_no_op_mode_has_an_envelope_and_no_pr(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Nothing to do", labels=["demo:no-op"])
    r = run_agent(fleet, n, "r3")
    assert r.exit_code == 0
    assert r.capture.kind is CaptureKind.ENVELOPE and r.capture.zero_turns is False
    assert fleet.board.pull_requests_closing(n) == ()
    assert r.outcome.outcome is Outcome.NO_OP


def test_rate_limit_mode_darkens_with_the_stated_reset(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Limited", labels=["demo:rate-limit"])
    r = run_agent(fleet, n, "r4")
    assert r.exit_code == 1
    assert r.capture.is_error
    assert r.outcome.outcome is Outcome.CAPACITY
    assert fleet.board.pull_requests_closing(n) == ()
    limit = r.limit
    assert limit is not None and limit.source is CapacitySource.RATE_LIMIT
    assert limit.reset_at is not None and limit.reset_at > datetime.now(UTC)
    assert not r.clean


C, X, G, P = AgentKind.CLAUDE, AgentKind.CODEX, AgentKind.GEMINI, AgentKind.PLAIN
ENV, NONE, GARB, UNREAD = (
    CaptureKind.ENVELOPE,
    CaptureKind.NO_ENVELOPE,
    CaptureKind.GARBLED,
    CaptureKind.NOT_PARSED,
)
# (mode, kind) -> how the output reads, the outcome, the exit code. A Codex or Gemini limit or
# revocation has no documented text, so it reads as a failure before the first turn ("other"); a
# plain agent's output is never read, so nothing proves zero turns and nothing is retried.
FAULTS = {
    ("rate-limit-unknown", C): (ENV, Outcome.CAPACITY, 1),
    ("rate-limit-unknown", X): (NONE, Outcome.FAILED, 1),
    ("rate-limit-unknown", G): (ENV, Outcome.FAILED, 1),
    ("rate-limit-unknown", P): (UNREAD, Outcome.FAILED, 1),
    ("revoked", C): (ENV, Outcome.CAPACITY, 1),
    ("revoked", X): (NONE, Outcome.FAILED, 1),
    ("revoked", G): (ENV, Outcome.FAILED, 1),
    ("revoked", P): (UNREAD, Outcome.FAILED, 1),
    ("transient", C): (NONE, Outcome.RETRY_PARKED, 1),
    ("transient", X): (NONE, Outcome.RETRY_PARKED, 1),
    ("transient", G): (NONE, Outcome.RETRY_PARKED, 1),
    ("transient", P): (UNREAD, Outcome.FAILED, 1),
    ("crash", C): (NONE, Outcome.FAILED, 1),
    ("crash", X): (NONE, Outcome.FAILED, 1),
    ("crash", G): (NONE, Outcome.FAILED, 1),
    ("crash", P): (UNREAD, Outcome.FAILED, 1),
    ("blocker", C): (ENV, Outcome.BLOCKED, 0),
    ("blocker", X): (ENV, Outcome.BLOCKED, 0),
    ("blocker", G): (ENV, Outcome.BLOCKED, 0),
    ("blocker", P): (UNREAD, Outcome.BLOCKED, 0),
    ("garbled", C): (GARB, Outcome.GARBLED, 0),
    ("garbled", X): (GARB, Outcome.GARBLED, 0),
    ("garbled", G): (GARB, Outcome.GARBLED, 0),
    ("garbled", P): (UNREAD, Outcome.NO_OP, 0),
    ("inject-revoked", C): (ENV, Outcome.NO_OP, 0),
    ("inject-revoked", X): (ENV, Outcome.NO_OP, 0),
    ("inject-revoked", G): (ENV, Outcome.NO_OP, 0),
    ("inject-revoked", P): (UNREAD, Outcome.NO_OP, 0),
    # Claude Code's documented whole-result limit form, exit 0: accepted, but its past reset is not
    # a recovery, and the issue's capacity outcomes are bounded (select's capacity-loop)
    ("inject-limit", C): (ENV, Outcome.CAPACITY, 0),
    ("inject-limit", X): (ENV, Outcome.NO_OP, 0),
    ("inject-limit", G): (ENV, Outcome.NO_OP, 0),
    ("inject-limit", P): (UNREAD, Outcome.NO_OP, 0),
}


@pytest.mark.parametrize(("mode", "agent"), list(FAULTS), ids=[f"{k.value}-{m}" for m, k in FAULTS])
def test_fault_modes(fleet: Fleet, mode: str, agent: AgentKind) -> None:
    kind, outcome, exit_code = FAULTS[(mode, agent)]
    n = fleet.board.create_issue(f"Fault {mode}", labels=[f"demo:{mode}"])
    r = run_agent(fleet, n, f"f-{mode}-{agent.value}", agent)
    assert r.exit_code == exit_code, r.output
    assert r.capture.kind is kind, r.capture.detail
    assert r.outcome.outcome is outcome, r.outcome.detail
    assert fleet.board.pull_requests_closing(n) == ()
    if (mode, agent) == ("revoked", C):
        assert r.limit is not None and r.limit.source is CapacitySource.REVOKED
    elif (mode, agent) in (("rate-limit-unknown", C), ("inject-limit", C)):
        assert r.limit is not None and r.limit.reset_at is None
    else:  # the model's own words, and every undocumented text, darken nothing
        assert r.limit is None
    if mode == "crash":
        assert "Traceback" in r.output
    if mode == "blocker":
        assert json.loads(r.results.read_text())["blocker"]["reason"]


@pytest.mark.parametrize("agent", list(AgentKind))
def test_every_kind_merges_its_pr_and_reads_as_a_clean_run(fleet: Fleet, agent: AgentKind) -> None:
    n = fleet.board.create_issue(f"Write the {agent.value} note")
    r = run_agent(fleet, n, f"k-{agent.value}", agent)
    assert r.exit_code == 0, r.output
    assert r.outcome.outcome is Outcome.SUCCESS, r.outcome.detail
    assert r.clean and r.limit is None
    # turns are counted where the CLI reports them, and unknown (never zero) where it does not
    assert (r.capture.turns is None) is (agent is P)


@pytest.mark.slow
def test_hang_mode_runs_until_killed_with_a_child(fleet: Fleet) -> None:
    n = fleet.board.create_issue("Hang", labels=["demo:hang"])
    wt = _worktree(fleet, "h1")
    gate = ForgeGate(fleet.board, n, "agent").serving()
    path = gate.__enter__()
    env = _env(fleet, n, "h1", fleet.tmp / "r.json", fleet.tmp / "missing-brief.md", path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleet.agents.demo"],
        cwd=wt,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: the test's stand-in for a unit's cgroup
    )
    try:
        child = None
        deadline = time.monotonic() + AGENT_TIMEOUT_S
        assert proc.stdout is not None
        while child is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if "child sleep pid" in line:
                child = int(line.split("child sleep pid ")[1].split(",")[0])
        assert child is not None, "the hang mode never announced its child"
        assert proc.poll() is None  # still hanging
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        for _ in range(100):  # the child is gone with the group (bounded: 100 x 50 ms)
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail(f"child {child} survived the group kill")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        gate.__exit__(None, None, None)
