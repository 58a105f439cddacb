"""What the fault tests on the four-worker harness stand on: their own fleet on the harness (board,
origin and inventory from ``harness.deploy``), that inventory re-written with the fault tests' policy
and the real ports after every restart, and bounded waits.

One board for the whole session (``deploy`` name ``faults``), never one per test: a master's target
clone remembers the origin it was cloned from. Every test closes its own issues and stops its own
units, so a later test's sweep finds nothing of it.

The runner clone every master runs (``~/fleet-work/fleet``, synced from ``<shared>/fleet.git``
before each run, D11) is the harness's; the stale-runner test moves that remote on and dirties
that clone on purpose, which is exactly what D11's sync exists for.
"""

from __future__ import annotations

import base64
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import paramiko

from fleet.board.local import LocalBoard
from fleet.context import FleetContext
from fleet.core.markers import Kind, history
from fleet.core.model import CIState, Issue
from fleet.inventory import Inventory, WorkerConfig, load
from fleet.testing import harness
from fleet.testing.harness import Endpoint, HarnessInfo

T = TypeVar("T")

# Every wait is bounded. A demo run over SSH (runner sync + re-exec, worktree, the agent's git work,
# close-out) takes a few seconds here; a busy 2-core box running other harnesses may take ten times
# that, and a wedged run should fail the test with a message, not hang it.
RUN_DEADLINE_S = 180.0
POLL_S = 0.5
# A worker's run-time limit in these tests: the backstop that ends a leaked demo:hang unit if a
# test dies before its own stop (the hang agent sleeps for an hour otherwise).
MAX_RUN_S = 600
# The reaper threshold in these tests (production: 2x the longest run). Small, so a test waits
# seconds for an orphan to become reapable; a live unit is protected by the probe, not the clock.
REAPER_THRESHOLD_S = 5
DOCKER_TIMEOUT_S = 120.0  # one docker CLI call on a busy box (kill/start measured ~1 s)


def wait_until(what: str, fn: Callable[[], T | None], deadline_s: float = RUN_DEADLINE_S) -> T:
    """Poll ``fn`` until it returns something truthy; fail naming ``what`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    last: T | None = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def kinds(issue: Issue) -> list[Kind]:
    return [m.kind for m in history(issue, "fleet").markers]


def docker(verb: str, container: str, *args: str, check: bool = True) -> str:
    """``docker <verb> <container> ...`` on one of OUR containers (``<project>-w*``) only."""
    if not container.startswith(f"{harness.project()}-w"):
        raise AssertionError(
            f"refusing to touch {container!r}: not a worker of {harness.project()}"
        )
    proc = subprocess.run(
        ["docker", verb, container, *args],
        capture_output=True,
        text=True,
        timeout=DOCKER_TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {verb} {container} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def _git(*args: str, cwd: Path | None = None) -> str:
    ident = ["-c", "user.name=fleet tests", "-c", "user.email=tests@fleet.invalid"]
    res = subprocess.run(
        ["git", *ident, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    if res.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout.strip()


def push_commit(bare: Path, work: Path, path: str, text: str, message: str) -> str:
    """Commit ``text`` at ``path`` onto ``main`` of ``bare`` through a scratch clone; the new sha."""
    shutil.rmtree(work, ignore_errors=True)
    _git("clone", "-q", str(bare), str(work))
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text, encoding="utf-8")
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", message, cwd=work)
    _git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=work)
    harness.grant_shared(bare)
    return _git("rev-parse", "HEAD", cwd=work)


@dataclass
class FaultFleet:
    """The harness plus one board, origin and inventory; re-read after every restart (ports)."""

    info: HarnessInfo
    session_info: HarnessInfo  # the session fixture's value: kept in step with the real ports
    root: Path  # in the shared directory: board, origin, inventory (deploy's board_dir)
    inventory_path: Path
    board: LocalBoard
    runner_remote: Path  # the harness's fleet.git: every master's runner clone syncs from it

    # -- the inventory -------------------------------------------------------------------------
    @property
    def inventory(self) -> Inventory:
        return load(self.inventory_path)

    def write_inventory(self) -> None:
        """The deployed inventory with the current ports, plus the fault tests' policy."""
        harness.write_inventory(
            self.info,
            self.inventory_path,
            board_dir=self.root,
            runner_remote=str(self.runner_remote),
            work=f"fleet-boards/{DEPLOY_NAME}",
            policy={
                "reaper_threshold_s": REAPER_THRESHOLD_S,
                "retry_backoffs_s": [1, 2, 4],
                "max_run_s": MAX_RUN_S,
            },
            max_run_s=MAX_RUN_S,
        )
        harness.grant_shared(self.inventory_path)

    @contextmanager
    def context(self, clock: Callable[[], datetime] | None = None) -> Iterator[FleetContext]:
        """A fresh FleetContext (fresh transports: a restarted worker has a new port)."""
        kw = {"clock": clock} if clock is not None else {}
        ctx = FleetContext(self.inventory, self.board, **kw)
        try:
            yield ctx
        finally:
            ctx.close()

    def refresh(self) -> None:
        """After ``docker start``: new ports, a new known_hosts, the inventory rewritten, and the
        session's HarnessInfo updated in place so later tests in this session see the real ports."""
        self.info = harness.refresh(self.info.shared_dir)
        harness.wait_ready(self.info)
        object.__setattr__(self.session_info, "containers", self.info.containers)
        self.write_inventory()

    # -- workers -------------------------------------------------------------------------------
    def endpoint(self, name: str) -> Endpoint:
        return next(ep for ep in self.info.endpoints() if ep.name == name)

    def container(self, worker: str) -> str:
        """The docker container of an inventory worker (``w4-beta`` -> ``<project>-w4``)."""
        return self.endpoint(worker).container.container

    def sh(self, worker: str, command: str, *, timeout: float = 60.0) -> tuple[int, str, str]:
        """Run ``command`` as the worker's master over a fresh verified connection."""
        client: paramiko.SSHClient = harness.connect(self.info, self.endpoint(worker))
        try:
            return harness.run(client, command, timeout=timeout)
        finally:
            client.close()

    def must(self, worker: str, command: str, *, timeout: float = 60.0) -> str:
        rc, out, err = self.sh(worker, command, timeout=timeout)
        assert rc == 0, f"{worker}: `{command}` exited {rc}: {err.strip()}"
        return out

    def config(self, worker: str) -> WorkerConfig:
        w = self.inventory.worker(worker)
        assert w is not None, f"no worker {worker!r} in {self.inventory_path}"
        return w

    def state_dir(self, worker: str) -> str:
        return self.config(worker).state_dir

    def live_units(self, worker: str, issue: int) -> list[str]:
        """The ActiveState of ``task-<issue>`` under that master, straight from systemctl."""
        rc, out, _ = self.sh(worker, f"systemctl --user show task-{issue} -p ActiveState --value")
        state = out.strip() if rc == 0 else ""
        return [state] if state in ("active", "activating", "deactivating", "reloading") else []

    def cleanup_unit(self, worker: str, issue: int) -> None:
        """Stop and forget ``task-<issue>`` under that master; a worker that is down is skipped."""
        try:
            self.sh(
                worker,
                f"systemctl --user stop task-{issue}; systemctl --user reset-failed task-{issue}",
                timeout=60,
            )
        except (OSError, paramiko.SSHException, EOFError):
            pass

    # -- the board -----------------------------------------------------------------------------
    def issue(self, number: int) -> Issue:
        issue = self.board.issue(number)
        assert issue is not None, f"#{number} is not on the board"
        return issue

    def wait_marker(self, number: int, kind: Kind, deadline_s: float = RUN_DEADLINE_S) -> Issue:
        def seen() -> Issue | None:
            issue = self.issue(number)
            return issue if kind in kinds(issue) else None

        return wait_until(f"a {kind} marker on #{number}", seen, deadline_s)

    def wait_last(self, number: int, kind: Kind, deadline_s: float = RUN_DEADLINE_S) -> Issue:
        def seen() -> Issue | None:
            issue = self.issue(number)
            got = kinds(issue)
            return issue if got and got[-1] is kind else None

        return wait_until(f"{kind} as the last marker on #{number}", seen, deadline_s)


DEPLOY_NAME = "faults"  # harness.deploy's name: the board dir and ~/fleet-boards/<name> on masters
_CACHE: dict[Path, FaultFleet] = {}


def fault_fleet(info: HarnessInfo, deploy: Callable[[str], Path]) -> FaultFleet:
    """The session's one FaultFleet (one board: see the module docstring); made on first use."""
    shared = info.shared_dir.resolve()
    if shared in _CACHE:
        return _CACHE[shared]
    path = deploy(DEPLOY_NAME)
    root = path.parent
    board = LocalBoard(root / "board.sqlite3", root / "origin.git")
    board.set_ci(CIState.GREEN)
    _git("config", "core.sharedRepository", "group", cwd=root / "origin.git")
    harness.grant_shared(root)
    for c in info.containers:
        provide_zone(c.container, DEMO_ZONE)
    f = FaultFleet(info, info, root, path, board, shared / "fleet.git")
    f.write_inventory()
    _CACHE[shared] = f
    return f


# The zone the demo agent's rate-limit text names ("resets 3pm (Europe/Lisbon)").
DEMO_ZONE = "Europe/Lisbon"


def provide_zone(container: str, zone: str) -> None:
    """Give a worker the host's tz file for ``zone`` when its image has none.

    The harness image is built without ``tzdata``, so a worker cannot resolve "resets 3pm
    (Europe/Lisbon)" and — rightly, D8 property 2 — records the reset as unknown, which no clock
    clears. A real worker has a tz database; this puts back the one file the demo's text needs.
    """
    target = f"/usr/share/zoneinfo/{zone}"
    if docker("exec", container, "sh", "-c", f"test -e {target} && echo present", check=False):
        return
    docker("exec", container, "mkdir", "-p", str(Path(target).parent))
    proc = subprocess.run(  # `docker cp` names the container inside its argument: checked above
        ["docker", "cp", f"/usr/share/zoneinfo/{zone}", f"{container}:{target}"],
        capture_output=True,
        text=True,
        timeout=DOCKER_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"docker cp of {zone} into {container}: {proc.stderr}"


def read_remote(f: FaultFleet, worker: str, path: str) -> bytes:
    """A file on a worker, byte for byte (base64 over SSH: the text is compared exactly)."""
    out = f.must(worker, f"base64 -w0 -- {shlex.quote(path)}")
    return base64.b64decode(out.strip())


# -- fixtures and helpers both fault modules use (imported there by name) ------------------------


@dataclass
class Leftovers:
    """What a test started, undone whatever happened: units stopped, issues closed."""

    units: list[tuple[str, int]] = field(default_factory=list)
    issues: list[int] = field(default_factory=list)


def leftovers(ff: FaultFleet) -> Iterator[Leftovers]:
    """The body of each module's ``left`` fixture: yield the list, then undo what is on it."""
    todo = Leftovers()
    yield todo
    for worker, n in todo.units:
        ff.cleanup_unit(worker, n)
    for n in todo.issues:
        if ff.issue(n).is_open:
            ff.board.close(n)


def file_issue(ff: FaultFleet, left: Leftovers, title: str, body: str = "", **kw: Any) -> int:
    """File an issue that this test closes at its end (``left``)."""
    n = ff.board.create_issue(title, body, **kw)
    left.issues.append(n)
    return n


def merged_prs(ff: FaultFleet, n: int) -> list[int]:
    return [p.number for p in ff.board.pull_requests_closing(n) if p.merged]


def start_fields(issue: Issue) -> dict[str, str]:
    """The fields of the issue's last start marker (run, worker, master, unit)."""
    m = history(issue, "fleet").last_of(Kind.START)
    assert m is not None, f"#{issue.number} has no start marker"
    return dict(m.fields)
