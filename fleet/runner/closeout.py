"""Run step 8 as a pure decision: from what the run left behind to the one terminal marker.

The runner's close-out (``run.py``) does the I/O — read the capture, ask the forge, read the results
file, write the capacity file, post the marker — and hands the values to :func:`decide_close_out`.
The capture is read **once** here, by the worker's agent-kind adapter (``fleet.agentkinds``), and
that one :class:`~fleet.agentkinds.AgentReport` feeds both the retry gate and the outcome, so the
two cannot disagree about whether the run started (D7), whatever the CLI. Tests call this same function; there is
no second copy of the pipeline to drift from it (D15's testing corollary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleet.agentkinds import ADAPTERS, AgentKind, AgentReport
from fleet.core.exits import RunExit
from fleet.core.markers import Kind, render
from fleet.core.model import PullRequest, iso
from fleet.runner.brief import declared_blocker, declared_left_open
from fleet.runner.capacity import LimitSignal
from fleet.runner.outcome import Outcome, OutcomeDecision, derive_outcome
from fleet.runner.retry import RetryDecision, decide_retry

# Outcomes that are the mechanism working, not a failed run: the runner exits 0 for them.
NOT_FAILURES = frozenset(
    {
        Outcome.SUCCESS,
        Outcome.NO_OP,
        Outcome.PR_OPEN,
        Outcome.BLOCKED,
        Outcome.RETRY_PARKED,
        Outcome.CAPACITY,
        Outcome.STOPPED,
    }
)

# The failed marker's name for a merged PR record that origin does not prove (``merge=unproven``).
MERGE_UNPROVEN = "merge-unproven"

KINDS: Mapping[Outcome, Kind] = {
    Outcome.SUCCESS: Kind.SUCCESS,
    Outcome.PR_OPEN: Kind.PR_OPEN,
    Outcome.NO_OP: Kind.NO_OP,
    Outcome.FAILED: Kind.FAILED,
    Outcome.BLOCKED: Kind.BLOCKED,
    Outcome.CAPACITY: Kind.CAPACITY,
    Outcome.RETRY_PARKED: Kind.PARKED,
    Outcome.STOPPED: Kind.STOPPED,
    Outcome.TIMED_OUT: Kind.TIMED_OUT,
    Outcome.TURN_LIMIT: Kind.TURN_LIMIT,
    Outcome.GARBLED: Kind.GARBLED,
    Outcome.TOMBSTONE_RISK: Kind.CROSS_REPO,
}


@dataclass(frozen=True)
class CloseOut:
    """Everything step 8 decided, as one value."""

    report: AgentReport  # the one reading of the agent's output (D7)
    limit: LimitSignal | None
    retry: RetryDecision
    blocker: dict | None
    decision: OutcomeDecision
    marker: str  # the terminal comment to post
    warnings: tuple[str, ...]
    # D6: posted after a success marker when the agent declared the issue deliberately left open,
    # and the issue is still open once the success is posted (the runner checks); else None.
    left_open: str | None = None

    @property
    def exit(self) -> RunExit:
        return RunExit.OK if self.decision.outcome in NOT_FAILURES else RunExit.FAILED

    def clean(self, exit_code: int | None) -> bool:
        """May this run heal the worker's capacity file (D8 property 1)?"""
        return self.report.clean(exit_code)


def decide_close_out(
    *,
    output: str,
    prs: Sequence[PullRequest],
    forge_error: str | None,
    run_started_at: datetime,
    exit_code: int | None,
    signal_name: str | None,
    timed_out: bool,
    workspace_failure: str | None,
    retries_so_far: int,
    backoffs_s: Sequence[int],
    results: dict | None,
    now: datetime,
    run_id: str | None = None,
    agent: AgentKind = AgentKind.CLAUDE,
    max_turns: int | None = None,
    turns_stopped: int | None = None,
    unproven: Mapping[int, str] | None = None,
) -> CloseOut:
    """Step 8, pure: ``output`` is the agent's merged stdout+stderr, ``prs`` the forge's answer,
    ``agent`` the worker's agent kind (its adapter reads the output).

    ``unproven`` maps each merged PR of this run that origin does not prove (``merge_proof``) to
    why: such a run failed, whatever else it claims — the record is not the merge (issue 16).
    """
    report = ADAPTERS[agent].read(output, exit_code, now)  # read ONCE (D7)
    limit = report.limit  # only from the CLI's own error fields and exit status
    retry = _retry_gate(report, output, exit_code, prs, run_started_at, retries_so_far, backoffs_s)
    blocker, warning = declared_blocker(results)
    decision = derive_outcome(
        prs=prs,
        run_started_at=run_started_at,
        capture=report,
        exit_code=exit_code,
        signal=signal_name,
        timed_out=timed_out,
        limit=limit,
        retry=retry,
        declared_blocker=blocker,
        turn_limited=turn_limit_detail(report, max_turns, turns_stopped),
    )
    decision = _overruled(decision, signal_name, workspace_failure, unproven, forge_error)
    marker = marker_for(
        decision,
        exit_code=exit_code,
        signal_name=signal_name,
        limit=limit,
        delay_s=retry.delay_s,
        now=now,
        blocker=blocker,
        evidence=_evidence(report),
        run_id=run_id,
    )
    left_open, left_warning = _left_open(results, run_id, decision)
    warnings = tuple(w for w in (warning, left_warning) if w)
    return CloseOut(report, limit, retry, blocker, decision, marker, warnings, left_open)


def _retry_gate(
    report: AgentReport,
    output: str,
    exit_code: int | None,
    prs: Sequence[PullRequest],
    run_started_at: datetime,
    retries_so_far: int,
    backoffs_s: Sequence[int],
) -> RetryDecision:
    """D7's gate on the same reading as the outcome; an artifact is this run's by time (D16)."""
    mine = [p for p in prs if p.created_at >= run_started_at]  # D16: by time, not existence
    return decide_retry(
        capture=report,
        output=output,
        exit_code=exit_code if exit_code is not None else -1,
        limit=report.limit,
        artifact_found=bool(mine),
        retries_so_far=retries_so_far,
        backoffs_s=backoffs_s,
    )


def _left_open(
    results: dict | None, run_id: str | None, decision: OutcomeDecision
) -> tuple[str | None, str | None]:
    """(D6's left-open marker when a success declared it, else None; a warning about the
    results file's declaration, else None)."""
    reason, warning = declared_left_open(results)
    if reason is None or decision.outcome is not Outcome.SUCCESS:
        return None, warning
    return left_open_marker(reason, run_id, decision), warning


def _overruled(
    decision: OutcomeDecision,
    signal_name: str | None,
    workspace_failure: str | None,
    unproven: Mapping[int, str] | None,
    forge_error: str | None,
) -> OutcomeDecision:
    """The outcome once what the agent's output cannot know is weighed: a broken workspace and a
    merge origin does not prove fail the run (unless a signal stopped it), and a forge that could
    not be read turns a no-op into a failure."""
    if workspace_failure is not None and signal_name is None:
        return OutcomeDecision(Outcome.FAILED, None, workspace_failure)
    if unproven and signal_name is None:
        why = "; ".join(unproven[n] for n in sorted(unproven))
        return OutcomeDecision(Outcome.FAILED, None, f"{MERGE_UNPROVEN}: {why}")
    if forge_error is not None and decision.outcome in (Outcome.NO_OP, Outcome.FAILED):
        # Could-not-check is not "no PR": never a no-op on a forge we could not read (D20).
        return OutcomeDecision(Outcome.FAILED, None, forge_error)
    return decision


def left_open_marker(reason: str, run_id: str | None, decision: OutcomeDecision) -> str:
    """D6's non-terminal "finished but deliberately left open": it follows the success marker and
    becomes the last word, so the open issue is neither a tombstone nor latched. It has a glyph —
    the glyph-less first version left the success as the last word."""
    return render(
        Kind.LEFT_OPEN, _run_fields(decision, run_id), f"Left open on purpose by the run: {reason}"
    )


def _run_fields(decision: OutcomeDecision, run_id: str | None) -> dict[str, object]:
    """The fields every marker of a run's end carries: the run it ends, the PR it rests on."""
    fields: dict[str, object] = {"run": run_id}
    pr = decision.pr
    if pr is not None:
        fields["pr"] = f"{pr.repository}#{pr.number}" if pr.repository else f"#{pr.number}"
    return fields


def turn_limit_detail(
    report: AgentReport, max_turns: int | None, turns_stopped: int | None
) -> str | None:
    """How the run met its D13 turn bound, or None: the runner stopped it (a CLI without its own
    flag), or the CLI's own flag ended it — an error reading whose turns reached the bound."""
    if max_turns is None:
        return None
    if turns_stopped is not None:
        return (
            f"the runner stopped the agent after {turns_stopped} turns: over policy.max_turns "
            f"{max_turns} ({report.agent} has no max-turns flag of its own)"
        )
    if report.is_error and report.turns is not None and report.turns >= max_turns:
        return (
            f"the agent's own max-turns flag ended the run at {report.turns} turns "
            f"(policy.max_turns {max_turns})"
        )
    return None


def _evidence(report: AgentReport) -> str:
    """The reading, and the CLI's own words it rests on, for the marker's note."""
    said = f"; the CLI said: {report.evidence}" if report.evidence else ""
    turns = "unknown" if report.turns is None else report.turns
    return f"{report.agent} agent, turns {turns}: {report.detail}{said}"


def marker_for(
    decision: OutcomeDecision,
    *,
    exit_code: int | None,
    signal_name: str | None,
    limit: LimitSignal | None,
    delay_s: int | None,
    now: datetime,
    blocker: dict | None,
    evidence: str,
    run_id: str | None = None,
) -> str:
    """The terminal marker text for an outcome. ``run=`` names the start it ends, so a reader pairs
    them exactly even when two runs of one issue overlap or clocks disagree (the timeline)."""
    kind = KINDS[decision.outcome]
    fields = _run_fields(decision, run_id)
    if kind is Kind.STOPPED:
        fields["signal"] = signal_name or "-"
    if kind in (Kind.FAILED, Kind.GARBLED) and exit_code is not None:
        fields["exit"] = exit_code
    if kind is Kind.FAILED and decision.detail.startswith(MERGE_UNPROVEN):
        fields["merge"] = "unproven"
    if kind is Kind.CAPACITY and limit is not None:
        fields["source"] = str(limit.source)
        fields["reset"] = iso(limit.reset_at) if limit.reset_at else "unknown"
    if kind is Kind.PARKED and delay_s is not None:
        fields["due"] = iso(now + timedelta(seconds=delay_s))
    if kind is Kind.BLOCKED and blocker is not None:
        fields["needs"] = ",".join(str(n) for n in blocker.get("needs", [])) or "-"
    note = decision.detail
    if kind is Kind.STOPPED:
        note = "Stopped by an external signal. This says nothing about the work (D12)."
    if kind in (Kind.GARBLED, Kind.FAILED, Kind.NO_OP, Kind.CAPACITY, Kind.PARKED, Kind.TURN_LIMIT):
        note = f"{decision.detail}\n{evidence}"
    if kind is Kind.BLOCKED and blocker is not None:
        note = f"Declared blocker: {blocker.get('reason', '')}"
    return render(kind, fields, note)
