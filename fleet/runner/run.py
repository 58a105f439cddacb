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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType

from fleet.board.base import Board, BoardError
from fleet.inventory import Inventory, WorkerConfig
from fleet.markers import Kind, history, render
from fleet.model import Comment, PullRequest, iso
from fleet.runner.brief import clear_results, declared_blocker, read_results, render_brief
from fleet.runner.capacity import (
    capacity_path,
    clear_capacity,
    detect_limit,
    is_clean,
    to_capacity,
    write_capacity,
)
from fleet.runner.envelope import parse_capture
from fleet.runner.outcome import Outcome, OutcomeDecision, derive_outcome
from fleet.runner.retry import decide_retry
from fleet.runner.worktree import Worktree, WorktreeError, make_worktree, release_worktree

# Runner exit codes: 0 = the run ended with a terminal marker that is not a failure; non-zero
# fires the unit's OnFailure= alarm.
RUN_OK = 0
RUN_FAILED = 1
RUN_STALE = 70  # step 1: the runner's clone could not be synced, so it did not run (D11)
RUN_CLOSEOUT_FAILED = 71  # step 8: the terminal marker could not be posted, even after a retry
RUN_NO_START = 72  # step 4: the start marker could not be posted, so nothing ran

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The runner stops its agent this long before the unit's own limit, so the close-out still runs
# and the outcome is TIMED_OUT (a named outcome) instead of a bare SIGTERM from the supervisor.
CLOSEOUT_MARGIN_S = 15


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
    _agent: subprocess.Popen[bytes] | None = None

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
            self._stop_agent(signal.SIGTERM)
            raise _Signalled()

    def _stop_agent(self, sig: int) -> None:
        p = self._agent
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> int:
        started_wall = datetime.now(UTC)  # 2
        issue = self.board.issue(self.issue)  # 3: check 11 — closed or fixture means disposed of
        fixture = self.inventory.policy.fixture_label
        if issue is None or not issue.is_open or fixture in issue.labels:
            why = "missing" if issue is None else ("closed" if not issue.is_open else "a fixture")
            self.say(f"issue is {why} at the last moment (check 11); stopping silently")
            return RUN_OK
        h = history(issue, self.inventory.policy.identity)
        brief_version = render_brief(
            issue=0, title="", body="", mentions=(), results_file="", worktree=""
        ).version
        start = {
            "run": self.run_id,
            "worker": self.worker.name,
            "master": self.worker.master or os.environ.get("USER", "-"),
            "unit": f"task-{self.issue}",
            "brief": brief_version,
        }
        try:
            start_comment = self.post(render(Kind.START, start))  # 4
        except BoardError as exc:
            self.say(f"cannot post the start marker: {exc}; nothing ran")
            return RUN_NO_START
        # Attribution uses the board's own clock (the start marker's timestamp): PRs are stamped
        # by the same clock, so worker clock skew cannot credit or discredit an artifact (D16).
        run_started_at = start_comment.created_at
        self.say(f"started at {iso(started_wall)} (worker clock), {iso(run_started_at)} (board)")
        for s in _SIGNALS:
            signal.signal(s, self._on_signal)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = self.run_dir / "agent.log"
        results = self.run_dir / "results.json"
        wt: Worktree | None = None
        exit_code: int | None = None
        timed_out = False
        failure: str | None = None
        try:
            try:
                wt = make_worktree(self.worker, self.inventory, self.issue, self.run_id)  # 5
            except WorktreeError as exc:
                failure = f"workspace broken: {exc}"
            if wt is not None:
                exit_code, timed_out = self._agent_run(issue.title, issue.body, wt, log, results)
        except _Signalled:
            pass
        finally:
            for s in _SIGNALS:
                signal.signal(s, signal.SIG_IGN)
            code = self._close_out(
                run_started_at, h.retries, log, results, exit_code, timed_out, failure
            )
            if wt is not None:
                kept = release_worktree(wt)
                if kept:
                    self.say(f"worktree kept, it holds uncommitted work: {wt.path}")
        if self.signal_name is not None:  # re-raise so the supervisor sees the signal (D12)
            sig = signal.Signals[self.signal_name]
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        return code

    def _agent_run(
        self, title: str, body: str, wt: Worktree, log: Path, results: Path
    ) -> tuple[int | None, bool]:
        mentions = ()
        try:
            mentions = self.board.unread_mentions(self.issue)  # 6
        except BoardError as exc:
            self.say(f"mentions unreadable ({exc}); the brief goes without them")
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
        env = dict(os.environ)
        cfg = self.inventory.board
        env.update(
            {
                "FLEET_ISSUE": str(self.issue),
                "FLEET_RUN_ID": self.run_id,
                "FLEET_RESULTS": str(results),
                "FLEET_BRIEF": str(brief_file),
                "FLEET_WORKTREE": str(wt.path),
                "FLEET_INVENTORY": str(self.inventory.path),
                "FLEET_BOARD_PATH": str(cfg.path or ""),
                "FLEET_ORIGIN": str(cfg.origin or ""),
            }
        )
        limit_s = agent_timeout(self.worker.max_run_s)
        with open(log, "wb") as out, open(brief_file, "rb") as stdin:  # 7
            self._agent = subprocess.Popen(
                ["/bin/sh", "-c", self.worker.agent],
                cwd=wt.path,
                stdin=stdin,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            try:
                return self._agent.wait(timeout=limit_s), False
            except subprocess.TimeoutExpired:
                self.say(f"agent passed its run-time limit ({limit_s:.0f}s); stopping it")
                self._stop_agent(signal.SIGTERM)
                try:
                    self._agent.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._stop_agent(signal.SIGKILL)
                    self._agent.wait()
                return None, True

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
        exit_code: int | None,
        timed_out: bool,
        failure: str | None,
    ) -> int:
        """Step 8: derive the outcome from the forge and post it. Runs on every exit path."""
        now = datetime.now(UTC)
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        capture = parse_capture(text)  # parsed ONCE, feeding the retry gate and the outcome
        limit = detect_limit(text, capture.envelope, now)
        prs, forge_error = self._prs()
        mine = [p for p in prs if p.created_at >= started]
        retry = decide_retry(
            capture=capture,
            output=text,
            exit_code=exit_code if exit_code is not None else -1,
            limit=limit,
            artifact_found=bool(mine),
            retries_so_far=retries,
            backoffs_s=self.inventory.policy.retry_backoffs_s,
        )
        data, warn = read_results(results)
        blocker, warn2 = declared_blocker(data)
        for w in (warn, warn2):
            if w:
                self.say(w)
        decision = derive_outcome(
            prs=prs,
            run_started_at=started,
            capture=capture,
            exit_code=exit_code,
            signal=self.signal_name,
            timed_out=timed_out,
            limit=limit,
            retry=retry,
            declared_blocker=blocker,
        )
        if failure is not None and self.signal_name is None:
            decision = OutcomeDecision(Outcome.FAILED, None, failure)
        elif forge_error is not None and decision.outcome in (Outcome.NO_OP, Outcome.FAILED):
            decision = OutcomeDecision(Outcome.FAILED, None, forge_error)
        self._capacity(limit, exit_code, text, capture, now)
        body = marker_for(
            decision,
            exit_code=exit_code,
            signal_name=self.signal_name,
            limit=limit,
            delay_s=retry.delay_s,
            now=now,
            blocker=blocker,
            evidence=capture.detail,
        )
        try:
            self.post(body)
        except BoardError as exc:
            self.say(
                f"CLOSE-OUT FAILED after a retry: {exc}; the issue keeps its start marker "
                "(the reaper will find it)"
            )
            return RUN_CLOSEOUT_FAILED
        self.say(f"outcome {decision.outcome}: {decision.detail}")
        return RUN_OK if decision.outcome in _NOT_FAILURES else RUN_FAILED

    def _capacity(
        self, limit: object, exit_code: int | None, text: str, capture: object, now: datetime
    ) -> None:
        """D8: a limit darkens this worker; a clean run (exit 0, no signature) heals it."""
        path = capacity_path(Path(self.worker.state_dir))
        env = getattr(capture, "envelope", None)
        if limit is not None:
            write_capacity(path, to_capacity(limit, now=now, issue=self.issue))  # type: ignore[arg-type]
            self.say(f"worker {self.worker.name} is now capacity-dark ({path})")
        elif exit_code is not None and is_clean(exit_code, text, env) and clear_capacity(path):
            self.say(f"clean run: capacity file {path} deleted")


_NOT_FAILURES = {
    Outcome.SUCCESS,
    Outcome.NO_OP,
    Outcome.PR_OPEN,
    Outcome.BLOCKED,
    Outcome.RETRY_PARKED,
    Outcome.CAPACITY,
    Outcome.STOPPED,
}

_KINDS = {
    Outcome.SUCCESS: Kind.SUCCESS,
    Outcome.PR_OPEN: Kind.PR_OPEN,
    Outcome.NO_OP: Kind.NO_OP,
    Outcome.FAILED: Kind.FAILED,
    Outcome.BLOCKED: Kind.BLOCKED,
    Outcome.CAPACITY: Kind.CAPACITY,
    Outcome.RETRY_PARKED: Kind.PARKED,
    Outcome.STOPPED: Kind.STOPPED,
    Outcome.TIMED_OUT: Kind.TIMED_OUT,
    Outcome.GARBLED: Kind.GARBLED,
    Outcome.TOMBSTONE_RISK: Kind.CROSS_REPO,
}


def marker_for(
    decision: OutcomeDecision,
    *,
    exit_code: int | None,
    signal_name: str | None,
    limit: object,
    delay_s: int | None,
    now: datetime,
    blocker: dict | None,
    evidence: str,
) -> str:
    """The terminal marker text for an outcome. Pure."""
    kind = _KINDS[decision.outcome]
    fields: dict[str, object] = {}
    pr = decision.pr
    if pr is not None:
        fields["pr"] = f"{pr.repository}#{pr.number}" if pr.repository else f"#{pr.number}"
    if kind is Kind.STOPPED:
        fields["signal"] = signal_name or "-"
    if kind in (Kind.FAILED, Kind.GARBLED) and exit_code is not None:
        fields["exit"] = exit_code
    if kind is Kind.CAPACITY and limit is not None:
        fields["source"] = str(limit.source)  # type: ignore[attr-defined]
        reset = limit.reset_at  # type: ignore[attr-defined]
        fields["reset"] = iso(reset) if reset else "unknown"
    if kind is Kind.PARKED and delay_s is not None:
        fields["due"] = iso(now + timedelta(seconds=delay_s))
    if kind is Kind.BLOCKED and blocker is not None:
        fields["needs"] = ",".join(str(n) for n in blocker.get("needs", [])) or "-"
    note = decision.detail
    if kind is Kind.STOPPED:
        note = "Stopped by an external signal. This says nothing about the work (D12)."
    if kind is Kind.GARBLED:
        note = f"{decision.detail}\n{evidence}"
    if kind is Kind.BLOCKED and blocker is not None:
        note = f"Declared blocker: {blocker.get('reason', '')}"
    return render(kind, fields, note)
