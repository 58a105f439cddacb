"""The runner: it *is* the run, inside the unit ``task-<issue>`` on a worker (seed 003, "The run").

    1 sync the runner's own clone and re-exec once        (__main__.py; D11)
    2 record RUN_STARTED_AT                               everything after is attributed by time
    3 re-check disposal (check 11)                        closed or fixture: stop silently
    4 post the start marker                               before anything that can fail
    5 a per-run worktree, detached at fresh origin/main   verified before the agent gets it (D10)
    6 unread mentions into the brief, marked read after   at-least-once (D19)
    7 the agent, stdout+stderr captured                   one envelope, parsed once (D7)
    8 close-out in ``finally``                            the outcome comes from the forge (D2)

Signals: SIGTERM/SIGINT/SIGHUP stop the agent's process group, post a ``stopped`` marker that claims
nothing about the work (D12), then re-raise with the default action so the supervisor sees the
signal. A close-out that fails is retried once, then reported loudly with its own exit code: a
silent close-out is indistinguishable from a hang (D12).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from fleet.board.base import Board, BoardError
from fleet.board.local import LocalBoard
from fleet.core.authority import sort_mentions
from fleet.core.exits import RunExit
from fleet.core.markers import Kind, history, render
from fleet.core.model import Comment, Issue, Mention, PullRequest, iso, unit_name
from fleet.inventory import Inventory, WorkerConfig
from fleet.private import private_dir
from fleet.runner import turns
from fleet.runner.agent_env import agent_env, read_token
from fleet.runner.brief import brief_version, clear_results, read_results, render_brief
from fleet.runner.capacity import capacity_path, to_capacity
from fleet.runner.closeout import CloseOut, decide_close_out
from fleet.runner.forge_gate import ENV_VAR as FORGE_ENV
from fleet.runner.forge_gate import ForgeGate
from fleet.runner.heal import darken, describe_heal, heal, stamp_canary
from fleet.runner.merge_proof import ProofUnavailable, claimed, unproven_merges
from fleet.runner.prestart import BASELINE_ENV, forget_issue
from fleet.runner.waiting import exit_within
from fleet.runner.worktree import Worktree, WorktreeError, make_worktree, release_worktree

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The runner stops its agent this long before the unit's own limit, so the close-out still runs
# and the outcome is TIMED_OUT (a named outcome) instead of a bare SIGTERM from the supervisor.
CLOSEOUT_MARGIN_S = 15
# The author of the PRs an agent opens through the embedded forge's gate (the demo's own name).
AGENT_AUTHOR = "agent"


class _Signalled(BaseException):
    """Raised from the signal handler to unwind into the close-out (BaseException: not an error)."""


def agent_timeout(max_run_s: int) -> float:
    return max(1.0, max_run_s - min(CLOSEOUT_MARGIN_S, max_run_s * 0.2))


@dataclass
class Runner:
    inventory: Inventory
    board: Board
    worker: WorkerConfig
    issue: int
    run_id: str
    stderr: object = field(default_factory=lambda: sys.stderr)
    signal_name: str | None = None
    started_at: datetime | None = None  # step 2, this worker's clock: the capacity file's clock
    start_posted: bool = False  # step 4 done: a death after it is the board's to see, not ours
    _deferred: bool = False  # inside step 5: a signal is recorded, acted on when git returns
    worktree: Worktree | None = None  # step 5's workspace, released by the close-out's finally
    _agent: subprocess.Popen[bytes] | None = None
    turns_stopped: int | None = None  # the runner stopped the agent at this many turns (D13)

    # -- small helpers ---------------------------------------------------------------------------
    def say(self, line: str) -> None:
        print(f"fleet-runner #{self.issue} {self.run_id}: {line}", file=self.stderr, flush=True)  # type: ignore[call-overload]

    @property
    def run_dir(self) -> Path:
        return Path(self.worker.state_dir) / "runs" / f"{self.issue}-{self.run_id}"

    def post(self, text: str) -> Comment:
        """Post a comment, retry once, then raise: never swallow the close-out's failure (D12)."""
        try:
            return self.board.comment(self.issue, text)
        except BoardError as first:
            self.say(f"posting a marker failed ({first}); retrying once")
            time.sleep(1.0)
            return self.board.comment(self.issue, text)

    # -- signals ---------------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            if self._deferred:  # step 5: unwinding now would SIGKILL git mid-add (see _workspace)
                self.say(f"{self.signal_name} during step 5; stopping once the worktree is made")
                return
            self._stop_agent(signal.SIGTERM)
            raise _Signalled()

    def _workspace(self) -> Worktree:
        """Step 5, safe to interrupt: a signal that arrives while ``git worktree add`` runs is held
        until it returns. Unwinding mid-call would kill git with SIGKILL (subprocess.run does, on
        any exception), which leaves the worktree entry locked "initializing", perhaps with a
        placeholder HEAD that breaks every later fetch in the clone. Git's own SIGTERM handler
        cleans up after itself, so a signal sent to git too is safe as well."""
        self._deferred = True
        try:
            self.worktree = make_worktree(self.worker, self.inventory, self.issue, self.run_id)
        finally:
            self._deferred = False
        for line in self.worktree.pruned:
            self.say(line)
        if self.signal_name is not None:
            raise _Signalled()
        return self.worktree

    def _stop_agent(self, sig: int) -> None:
        p = self._agent
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> int:
        started_wall = self.started_at = datetime.now(UTC)  # 2
        disposed, issue = self._check_11()  # 3
        if disposed:
            return RunExit.OK
        run_started_at = self._post_start(started_wall)  # 4
        if run_started_at is None:
            return RunExit.NO_START
        for s in _SIGNALS:
            signal.signal(s, self._on_signal)
        log = self.run_dir / "agent.log"
        results = self.run_dir / "results.json"
        wt: Worktree | None = None
        exit_code: int | None = None
        timed_out = False
        failure: str | None = None
        if issue is None:  # check 11 could not read it: one more read, now for the brief
            issue, failure = self._read_after_start()
        retries = history(issue, self.inventory.policy).retries if issue else 0
        try:
            try:  # inside the close-out's reach: a directory that cannot be made is a failure,
                # named as such, never a crash that leaves the start marker alone (D12)
                private_dir(self.run_dir)
                if failure is None:
                    wt = self._workspace()  # 5
            except (WorktreeError, OSError) as exc:
                failure = f"workspace broken: {exc}"
            if wt is not None and issue is not None:
                exit_code, timed_out = self._agent_run(issue.title, issue.body, wt, log, results)
        except _Signalled:
            pass
        finally:
            for s in _SIGNALS:
                signal.signal(s, signal.SIG_IGN)
            code = self._close_out(
                run_started_at,
                retries,
                log,
                results,
                (exit_code, timed_out, failure),
                wt.base if wt is not None else None,
            )
            wt = wt or self.worktree  # made, then a held signal unwound before the assignment
            if wt is not None:
                kept = release_worktree(wt)
                if kept:
                    self.say(f"worktree kept, it holds uncommitted work: {wt.path}")
        if self.signal_name is not None:  # re-raise so the supervisor sees the signal (D12)
            sig = signal.Signals[self.signal_name]
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        return code

    def _check_11(self) -> tuple[bool, Issue | None]:
        """Step 3, check 11: (disposed of, the issue). Closed, missing or a fixture stops the run
        silently. Check 11 is OPEN (seed 003): a board it cannot read does not stop the run — the
        dispatcher's checks passed moments ago — and the log says so; the issue is then None."""
        try:
            issue = self.board.issue(self.issue)
        except BoardError as exc:
            self.say(f"check 11 could not read the issue ({exc}); proceeding: check 11 fails open")
            return False, None
        fixture = self.inventory.policy.fixture_label
        if issue is None or not issue.is_open or fixture in issue.labels:
            why = "missing" if issue is None else ("closed" if not issue.is_open else "a fixture")
            self.say(f"issue is {why} at the last moment (check 11); stopping silently")
            return True, issue
        return False, issue

    def _post_start(self, started_wall: datetime) -> datetime | None:
        """Step 4, before anything that can fail: the start marker. Returns the board's time of
        it, which attributes the run's PRs (D16), or None when it could not be posted."""
        start = {
            "run": self.run_id,
            "worker": self.worker.name,
            "master": self.worker.master or os.environ.get("USER", "-"),
            "unit": unit_name(self.issue),
            "brief": brief_version(),
            "agent": self.worker.agent_kind.value,  # which adapter reads this run (docs/agents.md)
            # check 7, advisory: the CI baseline the dispatch saw (green/red/unknown); a failure
            # of a run started on red spends no attempt (fleet.core.markers.history)
            "baseline": os.environ.get(BASELINE_ENV) or None,
        }
        try:
            start_comment = self.post(render(Kind.START, start))
        except BoardError as exc:
            self.say(f"cannot post the start marker: {exc}; nothing ran")
            return None
        self.start_posted = True
        warning = forget_issue(self.worker.state_dir, self.issue)  # this launch path works
        if warning:
            self.say(warning)
        # Attribution uses the board's own clock (the start marker's timestamp): PRs are stamped
        # by the same clock, so worker clock skew cannot credit or discredit an artifact (D16).
        run_started_at = start_comment.created_at
        self.say(f"started at {iso(started_wall)} (worker clock), {iso(run_started_at)} (board)")
        if stamp_canary(capacity_path(Path(self.worker.state_dir)), started_wall) is not None:
            self.say("this run is the canary of a rate limit with no stated reset (D8)")
        return run_started_at

    def _read_after_start(self) -> tuple[Issue | None, str | None]:
        """The issue for the brief when check 11 could not read it: without its text there is no
        work to hand the agent, so a second failure ends the run as a named failure (D12)."""
        try:
            issue = self.board.issue(self.issue)
        except BoardError as exc:
            return None, f"issue unreadable for the brief: {exc}"
        if issue is None:
            return None, "issue unreadable for the brief: the board no longer has it"
        return issue, None

    def _agent_run(
        self, title: str, body: str, wt: Worktree, log: Path, results: Path
    ) -> tuple[int | None, bool]:
        mentions: tuple[Mention, ...] = ()
        try:
            mentions = self.board.unread_mentions(self.issue)  # 6
        except BoardError as exc:
            self.say(f"mentions unreadable ({exc}); the brief goes without them")
        mentions, refused = sort_mentions(mentions, self.inventory.policy)
        for m, why in refused:  # named in the run's log, never in the brief
            self.say(f"mention {m.id} by {m.author} NOT injected: {why}")
        brief = render_brief(
            issue=self.issue,
            title=title,
            body=body,
            mentions=mentions,
            results_file=str(results),
            worktree=str(wt.path),
        )
        brief_file = self.run_dir / "brief.md"
        brief_file.write_text(brief.text, encoding="utf-8")
        if mentions:
            try:  # marked read AFTER injection: a crash before this leaves them for the next run
                self.board.mark_mentions_read([m.id for m in mentions])
            except BoardError as exc:
                self.say(f"mentions not marked read ({exc}); the next run sees them again")
        clear_results(results)
        run_vars = {
            "FLEET_ISSUE": str(self.issue),
            "FLEET_RUN_ID": self.run_id,
            "FLEET_RESULTS": str(results),
            "FLEET_BRIEF": str(brief_file),
            "FLEET_WORKTREE": str(wt.path),
        }
        names, values = self._fleet_secrets()
        token = read_token(self.worker.agent_token_file)  # the agent's own credential
        credential = (self.worker.agent_token_env, token) if token else None
        env = agent_env(
            os.environ,
            run_vars,
            withheld_names=names,
            withheld_values=values,
            credential=credential,
        )
        with self._forge_gate() as gate:  # the agent's door to the embedded forge, not the file
            if gate is not None:
                env[FORGE_ENV] = str(gate)
            return self._spawn(wt, env, log, brief_file)

    def _fleet_secrets(self) -> tuple[set[str], set[str]]:
        """The fleet's own credential, by name and by value, kept out of the agent's environment."""
        gh = self.inventory.board.github
        if gh is None:
            return set(), set()
        values = {os.environ.get(gh.token_env, "")}
        try:
            values.add(Path(gh.token_file).expanduser().read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            pass
        return {gh.token_env}, values

    def _forge_gate(self) -> AbstractContextManager[Path | None]:
        if not isinstance(self.board, LocalBoard):
            return nullcontext(None)
        return ForgeGate(self.board, self.issue, AGENT_AUTHOR).serving()

    def _spawn(
        self, wt: Worktree, env: dict[str, str], log: Path, brief_file: Path
    ) -> tuple[int | None, bool]:
        limit_s = agent_timeout(self.worker.max_run_s)
        kind, max_turns = self.worker.agent_kind, self.inventory.policy.max_turns
        with open(log, "wb") as out, open(brief_file, "rb") as stdin:  # 7
            self._agent = subprocess.Popen(
                ["/bin/sh", "-c", turns.command_for(self.worker.agent, kind, max_turns)],
                cwd=wt.path,
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            return self._wait_agent(limit_s, log, turns.runner_bound(kind, max_turns))

    def _wait_agent(self, limit_s: float, log: Path, bound: int | None) -> tuple[int | None, bool]:
        """The agent's exit code, or None and whether the run-time limit ended it. With a turn
        ``bound`` (a CLI with no flag of its own, D13) the capture is counted every TURN_POLL_S and
        the agent stopped once it is past: ``turns_stopped`` then names the count."""
        assert self._agent is not None
        deadline = time.monotonic() + limit_s
        while True:
            left = deadline - time.monotonic()
            code = exit_within(self._agent, left if bound is None else min(left, turns.TURN_POLL_S))
            if code is not None:
                return code, False
            if time.monotonic() >= deadline:
                self.say(f"agent passed its run-time limit ({limit_s:.0f}s); stopping it")
                self._end_agent()
                return None, True
            count = turns.turns_so_far(log, self.worker.agent_kind)
            if turns.over_bound(count, bound):
                self.say(f"agent passed policy.max_turns ({count} > {bound}); stopping it")
                self.turns_stopped = count
                self._end_agent()
                return None, False

    def _end_agent(self) -> None:
        assert self._agent is not None
        self._stop_agent(signal.SIGTERM)
        try:
            self._agent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._stop_agent(signal.SIGKILL)
            self._agent.wait()

    def _prs(self) -> tuple[tuple[PullRequest, ...], str | None]:
        for attempt in (1, 2):
            try:
                return self.board.pull_requests_closing(self.issue), None
            except BoardError as exc:
                if attempt == 2:
                    return (), f"forge unreadable: {exc}"
                time.sleep(1.0)
        return (), "forge unreadable"

    def _close_out(
        self,
        started: datetime,
        retries: int,
        log: Path,
        results: Path,
        ended: tuple[int | None, bool, str | None],
        base: str | None,
    ) -> int:
        """Step 8's I/O around the pure :func:`decide_close_out`. Runs on every exit path.

        ``ended`` is how the agent ended: (exit code, timed out, workspace failure)."""
        exit_code, timed_out, failure = ended
        now = datetime.now(UTC)
        output = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        prs, forge_error = self._prs()
        data, warning = read_results(results)
        out = decide_close_out(
            output=output,
            prs=prs,
            forge_error=forge_error,
            run_started_at=started,
            exit_code=exit_code,
            signal_name=self.signal_name,
            timed_out=timed_out,
            workspace_failure=failure,
            retries_so_far=retries,
            backoffs_s=self.inventory.policy.retry_backoffs_s,
            results=data,
            now=now,
            run_id=self.run_id,
            agent=self.worker.agent_kind,
            max_turns=self.inventory.policy.max_turns,
            turns_stopped=self.turns_stopped,
            unproven=self._unproven(prs, started, base),
        )
        for line in (warning, *out.warnings):
            if line:
                self.say(line)
        self._capacity(out, exit_code, output, now)
        try:
            self.post(out.marker)
        except BoardError as exc:
            self.say(
                f"CLOSE-OUT FAILED after a retry: {exc}; the issue keeps its start marker "
                "(the reaper will find it)"
            )
            return RunExit.CLOSEOUT_FAILED
        self.say(f"outcome {out.decision.outcome}: {out.decision.detail}")
        if out.left_open is not None:
            self._left_open(out.left_open)
        return out.exit

    def _unproven(
        self, prs: tuple[PullRequest, ...], started: datetime, base: str | None
    ) -> dict[int, str]:
        """On the embedded board, the merged records origin does not prove (``merge_proof``)."""
        origin = self.inventory.board.origin
        if self.inventory.board.kind != "local" or origin is None:
            return {}  # a hosted forge's merged state is its own, written only by a real merge
        try:
            return dict(unproven_merges(prs, started=started, origin=origin, base=base))
        except ProofUnavailable as exc:
            return {p.number: f"could not check: {exc}" for p in claimed(prs, started)}

    def _left_open(self, marker: str) -> None:
        """D6: after a success, the agent's deliberate left-open — posted only while the issue is
        open (a merge that closed it needs none). Its own failure is said loudly and leaves the
        success as the last word: a tombstone the announcer reports, never a silent latch."""
        try:
            issue = self.board.issue(self.issue)
            if issue is None or not issue.is_open:
                self.say("left-open declared, but the issue is closed: no left-open marker")
                return
            self.post(marker)
        except BoardError as exc:
            self.say(f"LEFT-OPEN NOT POSTED after a retry: {exc}; the success stays the last word")
            return
        self.say("left-open posted: the issue stays open on purpose and stays dispatchable")

    def _capacity(self, out: CloseOut, exit_code: int | None, output: str, now: datetime) -> None:
        """D8: a limit darkens this worker; a clean run (exit 0, no signature) heals it, but only a
        run that started after the file was written, and never a revocation (fleet.runner.heal)."""
        path = capacity_path(Path(self.worker.state_dir))
        if out.limit is not None:
            darken(path, to_capacity(out.limit, now=now, issue=self.issue))
            self.say(f"worker {self.worker.name} is now capacity-dark ({path})")
        elif exit_code is not None and out.clean(exit_code):
            started = self.started_at or now
            what, warning = heal(path, started)
            for line in (warning, describe_heal(what, path, started)):
                if line:
                    self.say(line)
