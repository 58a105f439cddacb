"""The run's steps that only a real runner process can prove (seed 003, "The run"; D10-D12, D19).

Every test here runs ``python -m fleet.runner`` for real — as the unit a real ``dispatch()`` launches
under the portable supervisor, or invoked directly with the same argv the unit gets, so the exit
code is read straight from the process — against a real SQLite board, a real bare origin and the
stand-in agent. Each race window is made deterministic by a real obstacle the test holds, never by
a sleep:

* check 11 / step 3: the runner's own clone lock (the runner waits on it at step 1) keeps the run
  from reaching step 3 until the test has closed or labelled the issue;
* D12 / steps 4 and 8: the board is made immutable (``chattr +i``: these tests run as root, for
  whom ``chmod`` is no barrier) before the runner starts, or by the agent itself mid-run, so every
  board write fails the way a read-only or failing disk makes it fail;
* check 10's exit 49: the unit's log path is a FIFO nobody reads, so the worker's supervisor blocks
  before its handshake and the claim gets no answer within the transport's timeout;
* D10 / step 5: the worker's directories are named through a symlink (the worktree verifies only
  because it is made from the physical path), or a file stands where a directory must be made.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fleet
from fleet.core.exits import Exit, RunExit
from fleet.core.markers import Kind, history
from fleet.core.sync import clone_lock_path
from fleet.dispatch import dispatch
from fleet.inventory import WorkerConfig
from fleet.runner.__main__ import REEXEC_ENV
from fleet.runner.brief import brief_version
from fleet.runner.flock import exclusive
from fleet.runner.worktree import Worktree, release_worktree
from fleet.transport import LocalTransport
from fleet.units import __main__ as units_main
from fleet.units import portable
from tests.integration.fleet_fixture import (
    Fleet,
    all_comments,
    fleet_at,
    git,
    kinds,
    markers,
    run_runner,
    unit_log,
    wait_for_unit_result,
    worker,
)

pytestmark = pytest.mark.timeout(120)

FLEET_PACKAGE = Path(fleet.__file__).resolve().parent
# The transport's claim timeout for the exit-49 test: long enough for a loaded box to start the
# worker's supervisor, shorter than the worker's own handshake timeout (15 s), which would
# otherwise answer first with "failed" (43) instead of leaving the claim unanswered.
CLAIM_TIMEOUT_S = 5.0
RUNNER_FEED_S = 60.0  # bounds each wait on a runner that reads its inventory from a FIFO


# -- a runner remote: a git repository holding the fleet package (D11) --------------------------


class RunnerRemote:
    """A bare repository whose ``main`` holds a copy of the fleet under test, with its brief's
    version set by the test: the start marker's ``brief=`` then says which code ran (D11, D17)."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "runner-remote.git"
        self.seed = root / "runner-seed"
        git("init", "-q", "--bare", "-b", "main", str(self.bare))
        git("init", "-q", "-b", "main", str(self.seed))
        shutil.copytree(
            FLEET_PACKAGE, self.seed / "fleet", ignore=shutil.ignore_patterns("__pycache__")
        )
        git("remote", "add", "origin", str(self.bare), cwd=self.seed)

    def publish(self, version: str) -> str:
        """Commit the package with ``brief-version: <version>`` and push it to ``main``."""
        brief = self.seed / "fleet" / "runner" / "brief.md"
        _first, rest = brief.read_text(encoding="utf-8").split("\n", 1)
        brief.write_text(f"brief-version: {version}\n{rest}", encoding="utf-8")
        git("add", "-A", cwd=self.seed)
        git("commit", "-q", "-m", f"runner {version}", cwd=self.seed)
        git("push", "-q", "origin", "HEAD:main", cwd=self.seed)
        return git("rev-parse", "HEAD", cwd=self.seed)


# -- check 11 / step 3: the last-moment disposal re-check ----------------------------------------


@pytest.mark.skipif(shutil.which("flock") is None, reason="the clone lock needs flock(1)")
@pytest.mark.parametrize("disposal", ["closed", "fixture"])
def test_an_issue_disposed_of_after_dispatch_stops_its_runner_silently(
    tmp_path: Path, disposal: str
) -> None:
    remote = RunnerRemote(tmp_path)
    remote.publish("clone-1")
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    extra = {"runner_clone": str(clone), "runner_remote": str(remote.bare)}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        # The runner cannot pass step 1 while the test holds its clone's lock: whatever the unit's
        # timing, the issue is disposed of after dispatch's pre-flight and before step 3.
        # The same flock fleet.core.sync's script takes before it touches a clone.
        with exclusive(Path(clone_lock_path(str(clone)))):
            r = dispatch(f.ctx, n, worker="w1")
            assert r.launched, r.line()
            if disposal == "closed":
                f.board.close(n)  # type: ignore[attr-defined]
            else:
                f.board.add_labels(n, [f.inventory.policy.fixture_label])  # type: ignore[attr-defined]
        result = wait_for_unit_result(f, n)
        log = unit_log(f, n)
        assert (result["result"], result["exit_code"]) == ("exited", RunExit.OK), (result, log)
        assert result["notifier"] is None  # exit 0: no OnFailure alarm
        assert "(check 11); stopping silently" in log, log
        # It reached step 3 through step 1, from the clone: the first sync made the clone, so the
        # process that started from the installed code re-executed into it.
        assert "re-executing once" in log, log
        issue = f.board.issue(n)
        assert issue is not None and issue.comments == (), "check 11 posted to the board"
        assert not (Path(worker(f).state_dir) / "runs").exists()  # no run dir, no worktree


def test_a_missing_issue_at_the_last_moment_stops_silently(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        before = all_comments(f.board)
        done = run_runner(f, 999, "r-missing")
        assert done.returncode == RunExit.OK, done.stderr
        assert "issue is missing at the last moment (check 11)" in done.stderr
        assert all_comments(f.board) == before


# -- D11 / step 1: the self-updating runner --------------------------------------------------------


def test_the_runner_syncs_its_clone_and_reexecs_from_it_exactly_once(tmp_path: Path) -> None:
    remote = RunnerRemote(tmp_path)
    first = remote.publish("clone-1")
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    git("clone", "-q", str(remote.bare), str(clone))
    assert git("rev-parse", "HEAD", cwd=clone) == first
    second = remote.publish("clone-2")  # the clone is now stale
    extra = {"runner_clone": str(clone), "runner_remote": str(remote.bare)}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        done = run_runner(f, n, "r-sync")
        assert done.returncode == RunExit.OK, done.stderr
        assert git("rev-parse", "HEAD", cwd=clone) == second
        assert done.stderr.count("runner clone synced") == 1, done.stderr
        assert done.stderr.count("re-executing once") == 1, done.stderr
        issue = f.board.issue(n)
        assert issue is not None
        assert kinds(issue) == [Kind.START, Kind.SUCCESS]
        start = history(issue, "fleet").last_of(Kind.START)
        assert start is not None
        # The code that ran is the clone's new head, not the installed fleet nor the stale clone.
        assert start.get("brief") == "clone-2"
        assert start.get("run") == "r-sync"


def _synced_a_while_ago(clone: Path) -> None:
    """The clone as the previous run's sync left it, minutes before this run started."""
    then = time.time() - 600
    for name in ("HEAD", "index"):
        os.utime(clone / ".git" / name, (then, then))


def _feed_when_read(
    fifo: Path, text: str, times: int, before_first: Callable[[], None]
) -> list[str]:
    """Serve ``text`` to each of ``times`` readers of ``fifo``, calling ``before_first`` once the
    first reader has it open (the process is running then) and before anything is written.
    Bounded: a reader that never comes ends the feeding; what happened is returned."""
    log: list[str] = []
    for k in range(times):
        deadline = time.monotonic() + RUNNER_FEED_S
        while True:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError:  # ENXIO: no reader yet
                if time.monotonic() > deadline:
                    log.append(f"no reader {k + 1}")
                    return log
                time.sleep(0.05)
        if k == 0:
            before_first()
        os.set_blocking(fd, True)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        log.append(f"read {k + 1}")
        _until_no_reader(fifo, deadline)  # this reader is done before the next is served
    return log


def _until_no_reader(fifo: Path, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: the reader closed its end
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_clone_moved_by_another_run_after_this_one_started_still_reexecutes(
    tmp_path: Path,
) -> None:
    """Two runs share the runner clone. A started from it and imported its code; then B's sync
    moved the clone on; then A reaches step 1. A's sync finds the clone at the fetched head, yet
    A runs the code it imported before the move: only a re-exec runs the new code (D11). A is
    held between its start and step 1 by its inventory being a FIFO the test feeds."""
    remote = RunnerRemote(tmp_path)
    remote.publish("clone-old")
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    git("clone", "-q", str(remote.bare), str(clone))
    git("checkout", "-q", "--detach", "origin/main", cwd=clone)
    _synced_a_while_ago(clone)
    new = remote.publish("clone-new")
    extra = {"runner_clone": str(clone), "runner_remote": str(remote.bare)}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        fifo = f.root / "inventory-fed.yaml"
        os.mkfifo(fifo)
        text = f.inventory_path.read_text(encoding="utf-8")

        def other_runs_sync() -> None:  # B's step 1, while A is between its start and its own
            git("fetch", "-q", "origin", cwd=clone)
            git("checkout", "-q", "--detach", "origin/main", cwd=clone)

        fed: list[str] = []
        feeder = threading.Thread(
            target=lambda: fed.extend(_feed_when_read(fifo, text, 2, other_runs_sync))
        )
        feeder.start()
        argv = [sys.executable, "-m", "fleet.runner", "--issue", str(n), "--worker", "w1"]
        argv += ["--run-id", "r-overlap", "--inventory", str(fifo)]
        env = {k: v for k, v in os.environ.items() if k not in (REEXEC_ENV, "PYTHONPATH")}
        done = subprocess.run(
            argv, cwd=f.root, env={**env, "PYTHONPATH": str(clone)}, capture_output=True,
            text=True, timeout=RUNNER_FEED_S * 3, check=False,
        )  # fmt: skip
        feeder.join(RUNNER_FEED_S)
        assert done.returncode == RunExit.OK, done.stderr
        assert git("rev-parse", "HEAD", cwd=clone) == new
        assert "re-executing once" in done.stderr and "no re-exec" not in done.stderr, done.stderr
        assert fed == ["read 1", "read 2"], fed  # the re-executed process read it again
        issue = f.board.issue(n)
        assert issue is not None and kinds(issue) == [Kind.START, Kind.SUCCESS]


def test_a_runner_started_from_a_fresh_clone_runs_on_without_a_reexec(tmp_path: Path) -> None:
    """Started from the clone (as dispatch starts it), at the fetched head with a clean tree: this
    process is the fresh code, so step 1 goes on without a second interpreter; a stale or dirty
    clone still re-executes (the tests above)."""
    remote = RunnerRemote(tmp_path)
    head = remote.publish("clone-fresh")
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    git("clone", "-q", str(remote.bare), str(clone))
    git("checkout", "-q", "--detach", "origin/main", cwd=clone)  # as a sync leaves it
    _synced_a_while_ago(clone)
    extra = {"runner_clone": str(clone), "runner_remote": str(remote.bare)}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        done = run_runner(f, n, "r-fresh", env={"PYTHONPATH": str(clone)})
        assert done.returncode == RunExit.OK, done.stderr
        assert "no re-exec" in done.stderr and "re-executing" not in done.stderr, done.stderr
        assert git("rev-parse", "HEAD", cwd=clone) == head
        issue = f.board.issue(n)
        assert issue is not None and kinds(issue) == [Kind.START, Kind.SUCCESS]
        start = history(issue, "fleet").last_of(Kind.START)
        assert start is not None and start.get("brief") == "clone-fresh"  # the clone's code ran


def test_the_reexec_guard_skips_the_sync_for_its_own_run_only(tmp_path: Path) -> None:
    # A runner_clone that cannot be synced: any sync would end the run with exit 70.
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    extra = {"runner_clone": str(clone), "runner_remote": str(tmp_path / "no-such-remote.git")}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        # The re-executed process carries FLEET_RUNNER_REEXEC=<its run id>: it runs, no second sync.
        done = run_runner(f, n, "r-guard", env={REEXEC_ENV: "r-guard"})
        assert done.returncode == RunExit.OK, done.stderr
        assert "not synced" not in done.stderr and "re-executing" not in done.stderr
        issue = f.board.issue(n)
        assert issue is not None
        start = history(issue, "fleet").last_of(Kind.START)
        assert start is not None and start.get("brief") == brief_version()  # the code it was given
        # A value inherited from another run is no guard: this run syncs, fails, and stops.
        before = all_comments(f.board)
        stale = run_runner(f, n, "r-other", env={REEXEC_ENV: "r-guard"})
        assert stale.returncode == RunExit.STALE, stale.stderr
        assert all_comments(f.board) == before


@pytest.mark.parametrize("fault", ["remote-missing", "remote-gone-after-clone"])
def test_a_runner_clone_that_cannot_be_synced_exits_stale_with_no_marker(
    tmp_path: Path, fault: str
) -> None:
    clone = tmp_path.resolve() / "workers" / "w1" / "runner"
    remote_path = tmp_path / "runner-remote.git"
    if fault == "remote-gone-after-clone":
        remote = RunnerRemote(tmp_path)
        remote.publish("clone-1")
        git("clone", "-q", str(remote.bare), str(clone))
        shutil.rmtree(remote.bare)  # the clone exists, its origin cannot be fetched
    extra = {"runner_clone": str(clone), "runner_remote": str(remote_path)}
    with fleet_at(tmp_path, worker_extra=extra) as f:
        n = f.board.create_issue("Add a greeting", "body")
        done = run_runner(f, n, "r-stale")
        assert done.returncode == RunExit.STALE, done.stderr
        assert "refusing to run stale code (D11)" in done.stderr
        assert markers(f, n) == [] and all_comments(f.board) == 0
        assert not (Path(worker(f).state_dir) / "runs").exists()


# -- D12 / steps 4 and 8: a start or a terminal that cannot be posted -----------------------------


def _immutable(*paths: Path, on: bool) -> None:
    subprocess.run(["chattr", "+i" if on else "-i", *map(str, paths)], check=True, timeout=30)


@pytest.fixture
def can_freeze(tmp_path: Path) -> None:
    """``chattr +i`` is the only way to make a file unwritable for root; skip where it is absent."""
    probe = tmp_path / "chattr-probe"
    probe.write_text("x")
    try:
        _immutable(probe, on=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not available here (not root, or the filesystem lacks it)")
    _immutable(probe, on=False)
    probe.unlink()


def board_files(f: Fleet) -> tuple[Path, Path]:
    """The board and its write-ahead log: every write lands in the log first (WAL mode)."""
    db = Path(str(f.inventory.board.path))
    wal = db.with_name(db.name + "-wal")
    assert wal.exists(), "the test's own open board keeps the write-ahead log in place"
    return db, wal


@contextlib.contextmanager
def thawed_after(f: Fleet) -> Iterator[tuple[Path, Path]]:
    files = board_files(f)
    try:
        yield files
    finally:
        _immutable(*files, on=False)  # always: an immutable file outlives the test's tmp cleanup


@pytest.mark.usefixtures("can_freeze")
def test_a_start_marker_that_cannot_be_posted_is_no_start_and_nothing_ran(tmp_path: Path) -> None:
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        with thawed_after(f) as files:
            _immutable(*files, on=True)  # the runner can read the board, not write it
            done = run_runner(f, n, "r-nostart")
        assert done.returncode == RunExit.NO_START, done.stderr
        assert "retrying once" in done.stderr  # step 4 posts with the same retry as step 8
        assert "cannot post the start marker" in done.stderr and "nothing ran" in done.stderr
        assert markers(f, n) == []
        state = Path(worker(f).state_dir)
        assert not (state / "runs").exists() and not (state / "worktrees").exists()


@pytest.mark.usefixtures("can_freeze")
def test_a_terminal_that_cannot_be_posted_after_a_retry_is_closeout_failed(tmp_path: Path) -> None:
    # The agent itself makes the board immutable: after the start marker, before the close-out.
    root = tmp_path.resolve()
    db = root / "board.sqlite3"
    agent = f"chattr +i {shlex.quote(str(db))} {shlex.quote(str(db) + '-wal')}"
    with fleet_at(tmp_path, agent=agent) as f:
        n = f.board.create_issue("Add a greeting", "body")
        with thawed_after(f):
            done = run_runner(f, n, "r-closeout")
        assert done.returncode == RunExit.CLOSEOUT_FAILED, done.stderr
        assert done.stderr.count("posting a marker failed") == 1, done.stderr  # one retry
        assert "CLOSE-OUT FAILED after a retry" in done.stderr
        issue = f.board.issue(n)
        assert issue is not None and issue.is_open
        assert kinds(issue) == [Kind.START]  # the start stays: the reaper's evidence (D12)
        f.board.comment(n, "the board takes writes again")  # thawed: nothing was left broken


# -- D10 / step 5: the per-run worktree ----------------------------------------------------------


def test_through_a_symlinked_worker_dir_the_worktree_verifies_and_a_dirty_one_is_kept(
    tmp_path: Path,
) -> None:
    root = tmp_path.resolve()
    real = root / "workers" / "w1"
    real.mkdir(parents=True)
    link = root / "w1-link"
    link.symlink_to(real, target_is_directory=True)
    # r-dirty leaves an untracked file in its worktree; any other run is the demo's clean success.
    agent = (
        'if [ "$FLEET_RUN_ID" = r-dirty ]; then echo wip > wip.txt; '
        f"else exec {shlex.quote(sys.executable)} -m fleet.agents.demo; fi"
    )
    with fleet_at(tmp_path, agent=agent, worker_dir=link) as f:
        assert worker(f).clone.startswith(str(link)) and worker(f).state_dir.startswith(str(link))
        n = f.board.create_issue("Add a greeting", "body")
        dirty = run_runner(f, n, "r-dirty")
        kept = real / "worktrees" / f"{n}-r-dirty"  # the physical path, not the link's
        assert f"worktree kept, it holds uncommitted work: {kept}" in dirty.stderr, dirty.stderr
        assert (kept / "wip.txt").read_text() == "wip\n"
        # The verification passed through the link (git reports physical paths; a worktree made
        # under the link's spelling would not verify), and a clean run's worktree is removed.
        clean = run_runner(f, n, "r-clean")
        assert clean.returncode == RunExit.OK, clean.stderr
        assert markers(f, n)[-2:] == [Kind.START, Kind.SUCCESS]
        assert not (real / "worktrees" / f"{n}-r-clean").exists()
        # The kept tree's pointers are physical: it stays a working git tree once the link is gone.
        link.unlink()
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=kept, capture_output=True, text=True, timeout=60
        )
        assert status.returncode == 0 and "wip.txt" in status.stdout, status.stderr


@pytest.mark.parametrize("change", ["clean", "ignored", "untracked", "modified", "staged"])
def test_release_keeps_a_tree_with_uncommitted_work_and_removes_a_clean_one(
    tmp_path: Path, change: str
) -> None:
    # D10: keep, do not wipe. git's own refusal to remove an unclean tree is the check.
    clone = tmp_path / "clone"
    git("init", "-q", "-b", "main", str(clone))
    (clone / ".gitignore").write_text("*.log\n")
    (clone / "a.txt").write_text("a\n")
    git("add", "-A", cwd=clone)
    git("commit", "-q", "-m", "first", cwd=clone)
    path = tmp_path / "tree"
    git("worktree", "add", "--detach", "-q", str(path), cwd=clone)
    if change == "ignored":
        (path / "run.log").write_text("noise\n")
    elif change == "untracked":
        (path / "new.txt").write_text("new\n")
    elif change in ("modified", "staged"):
        (path / "a.txt").write_text("changed\n")
        if change == "staged":
            git("add", "a.txt", cwd=path)
    kept = release_worktree(Worktree(clone, path, git("rev-parse", "HEAD", cwd=clone)))
    assert kept is (change not in ("clean", "ignored"))
    assert path.exists() is kept


@pytest.mark.parametrize("blocked", ["worktrees", "runs"])
def test_a_workspace_directory_that_cannot_be_made_is_a_named_failure_not_a_crash(
    tmp_path: Path, blocked: str
) -> None:
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        state = Path(worker(f).state_dir)
        state.mkdir(parents=True, exist_ok=True)
        (state / blocked).write_text("a file where a directory must go\n")
        done = run_runner(f, n, "r-ws")
        assert done.returncode == RunExit.FAILED, done.stderr
        assert "Traceback" not in done.stderr
        assert markers(f, n) == [Kind.START, Kind.FAILED]  # terminal always (D12)
        assert "workspace broken" in markers_text(f, n)


# -- D19 / step 6: unread mentions into the brief, marked read only after ------------------------

MENTION = "@fleet please keep {{title}} and {0} literal\nsecond line: {{body}} too"


def test_mentions_are_injected_then_marked_read_and_survive_a_run_that_never_injected_them(
    tmp_path: Path,
) -> None:
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        c = f.board.comment(n, MENTION, author="octocat")
        assert [m.id for m in f.board.unread_mentions(n)] == [c.id]
        state = Path(worker(f).state_dir)
        # Run 1 never reaches step 6: its worktree path is taken, so step 5 fails the workspace.
        blocked = state / "worktrees" / f"{n}-r1"
        blocked.mkdir(parents=True)
        (blocked / "squatter").write_text("not a worktree\n")
        first = run_runner(f, n, "r1")
        assert first.returncode != RunExit.OK and "workspace broken" in markers_text(f, n)
        assert not (state / "runs" / f"{n}-r1" / "brief.md").exists()
        assert [m.id for m in f.board.unread_mentions(n)] == [c.id], "marked read, never injected"
        # Run 2 injects it, then marks it read.
        second = run_runner(f, n, "r2")
        assert second.returncode == RunExit.OK, second.stderr
        brief = (state / "runs" / f"{n}-r2" / "brief.md").read_text(encoding="utf-8")
        assert "- @octocat at " in brief and f"(comment {c.id}):" in brief
        # Verbatim, never expanded (one-pass rendering), continuation lines indented in the list.
        assert "  @fleet please keep {{title}} and {0} literal\n  second line:" in brief
        assert "please keep Add a greeting" not in brief
        assert f.board.unread_mentions(n) == ()


def markers_text(f: Fleet, n: int) -> str:
    issue = f.board.issue(n)
    assert issue is not None
    return "\n".join(c.body for c in issue.comments)


# -- check 10, exit 49: the claim was sent and no answer came back --------------------------------


class Relayed:
    """A worker's commands carried by a transport, as an SSH worker's are (here a local shell
    underneath): the claim is a command that may go unanswered. A local worker's own claim runs
    in this process and always answers (the next test)."""

    def __init__(self, w: WorkerConfig) -> None:
        self.worker = w.name
        self._shell = LocalTransport(w.name, path_prefix=w.path_prefix)

    def run(self, command: str, *, timeout: float | None = None, env=None):  # type: ignore[no-untyped-def]
        return self._shell.run(command, timeout=timeout, env=env)

    def close(self) -> None:
        self._shell.close()


def _wedge(f: Fleet, n: int) -> None:
    """The supervisor opens the unit's log before its handshake; a FIFO with no reader holds it
    there, so the claim is sent and its answer never comes (a wedged worker, seen from here)."""
    units = Path(worker(f).state_dir) / "units"
    units.mkdir(parents=True, mode=0o700)
    os.mkfifo(units / f"task-{n}.log")


@pytest.mark.slow
def test_a_claim_that_gets_no_answer_is_unconfirmed_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fleet_at(tmp_path) as f:
        f.ctx.transport_factory = Relayed
        n = f.board.create_issue("Add a greeting", "body")
        _wedge(f, n)
        monkeypatch.setattr(portable, "START_TIMEOUT_S", CLAIM_TIMEOUT_S)
        before = all_comments(f.board)
        try:
            r = dispatch(f.ctx, n, worker="w1")
            assert (r.outcome, r.code, r.check) == ("refused", Exit.CLAIM_UNCONFIRMED, 10), r
            assert "the claim got no answer" in r.reason and f"task-{n} may be live" in r.reason
            assert all_comments(f.board) == before  # a refusal writes nothing (D6)
        finally:
            # The wedged supervisor holds the name: stop it (SIGTERM to the lock's holder).
            f.ctx.supervisor(worker(f)).stop(n, timeout_s=5.0)
        assert [u for u in f.ctx.supervisor(worker(f)).probe() if u.issue == n and u.live] == []


@pytest.mark.slow
def test_a_wedged_local_supervisor_is_killed_and_its_claim_is_a_supervisor_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a local worker the claim runs in this process: a supervisor that never hands shakes is
    killed with its tree, so the answer is definite (43, the name free), never "may be live"."""
    with fleet_at(tmp_path) as f:
        n = f.board.create_issue("Add a greeting", "body")
        _wedge(f, n)
        monkeypatch.setattr(units_main, "HANDSHAKE_TIMEOUT_S", CLAIM_TIMEOUT_S)
        before = all_comments(f.board)
        r = dispatch(f.ctx, n, worker="w1")
        assert (r.outcome, r.code, r.check) == ("refused", Exit.SUPERVISOR_FAILED, 10), r
        assert "no handshake within" in r.reason and "supervisor killed" in r.reason, r.reason
        assert all_comments(f.board) == before
        assert [u for u in f.ctx.supervisor(worker(f)).probe() if u.issue == n and u.live] == []
