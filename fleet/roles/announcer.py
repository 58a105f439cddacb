"""The announcer: a Loop on the engine that files one report issue per stall nobody is coming for
(D14). The decision is pure (``fleet.core.announce``); this is the I/O around it.

One run = observe (one fleet probe, then one board read, the sweeper's heartbeat file) → ``assess``
(pure) → with ``--apply``, each stall is claimed and filed through the engine: claim → re-read the
live board → file unless an open issue already carries the report's title → release.

Two non-negotiables from D14, and where they live:

- **Idempotent by title against the live board, never a cache.** Nothing remembers what was filed:
  each report re-reads the board's open issues immediately before filing (a search index or a
  state file lags, and a lagging check files the same report twice). The engine's claim keeps two
  announcers on one box from both filing in the gap between that read and the write.
- **Every age derives from board timestamps.** ``now`` is the board page's own read time (the board
  clock), and every age is a marker's timestamp against it. The issue a dark worker's capacity file
  names is read live too, even when closed, so the darkness is dated by its capacity marker.

A halted fleet files nothing (the switch stops every board writer); an unreadable board files
nothing and, for ``--apply``, fails closed (D5) — an idempotence check cannot run without the board.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fleet.board.base import BoardError, BoardPage, LabelsDropped
from fleet.context import FleetContext
from fleet.control.switches import read_halt_file
from fleet.core.announce import Assessment, Report, Stall, assess, report_for, unclassified_stall
from fleet.core.exits import Exit
from fleet.core.model import Issue, Snapshot
from fleet.observe import probe_fleet, read_page
from fleet.roles.base import begin
from fleet.roles.engine import (
    Escalate,
    Escalation,
    Failure,
    FileClaims,
    IndependentItems,
    Result,
    drain,
)
from fleet.roles.notifier import NoticeOutcome, Notifier
from fleet.roles.notifier import key as notice_key
from fleet.trace import Trace, to_jsonable
from fleet.views.status import read_heartbeat


@dataclass(frozen=True)
class Filing:
    """What happened to one stall's report: filed now, already open on the board, or failed."""

    stall: Stall
    report: Report
    outcome: str  # would-file | filed | already-open | claimed-elsewhere | failed
    number: int | None = None  # the report issue
    detail: str = ""


@dataclass
class AnnounceReport:
    outcome: str  # filed | nothing | dry-run | halted | failed
    assessment: Assessment
    filings: list[Filing] = field(default_factory=list)
    exit: Exit = Exit.OK
    notices: list[NoticeOutcome] = field(default_factory=list)  # ignored steering, named once

    def counts(self) -> dict[str, int]:
        out = {"stalls": len(self.assessment.stalls), "quiet": len(self.assessment.quiet)}
        for f in self.filings:
            out[f.outcome] = out.get(f.outcome, 0) + 1
        for n in self.notices:
            out[f"notice-{n.outcome}"] = out.get(f"notice-{n.outcome}", 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "exit": int(self.exit),
            "summary": self.assessment.summary(),
            "filings": [
                {
                    "kind": f.stall.kind.value,
                    "subject": f.stall.subject,
                    "title": f.report.title,
                    "outcome": f.outcome,
                    "number": f.number,
                    "detail": f.detail,
                }
                for f in self.filings
            ],
            "quiet": [to_jsonable(q) for q in self.assessment.quiet],
            "board_error": self.assessment.board_error,
            "notices": [
                {
                    "issue": n.notice.issue,
                    "subject": n.notice.subject,
                    "why": n.notice.why,
                    "key": n.notice.key,
                    "outcome": n.outcome,
                }
                for n in self.notices
            ],
        }


def open_report(issues: Sequence[Issue], title: str) -> int | None:
    """The open issue that already carries this report's title, if any (idempotence, D14)."""
    want = title.strip()
    for i in issues:
        if i.is_open and i.title.strip() == want:
            return i.number
    return None


class Announcer(IndependentItems[Stall]):
    """A Loop: select_queue observes and decides; dispatch files one report."""

    def __init__(self, ctx: FleetContext, trace: Trace, *, apply: bool) -> None:
        self.ctx, self.trace, self.apply = ctx, trace, apply
        self.page: BoardPage | None = None
        self.snap: Snapshot | None = None
        self.assessment = Assessment((), ())
        self.filings: dict[str, Filing] = {}

    # the six methods
    def name(self) -> str:
        return "announcer"

    def select_queue(self) -> Sequence[Stall]:
        # Probe first, board second (as the reaper does): a run that ends after the probe posted
        # its terminal before it ended, so the board read that follows sees it.
        workers = probe_fleet(self.ctx)
        self.page, error = read_page(self.ctx)
        policy = self.ctx.inventory.policy
        if self.page is None:
            snap = Snapshot(self.ctx.clock(), (), workers, policy, board_error=error)
        else:
            # now = the board's clock at the read: every age is a board timestamp against it.
            now = self.page.read_at
            halt = read_halt_file(Path(self.ctx.inventory.halt.file), now)
            halts = (halt,) if halt is not None else ()
            snap = Snapshot(now, self.page.issues, workers, policy, halts)
            snap = self._with_capacity_issues(snap)
        heartbeat = read_heartbeat(Path(self.ctx.inventory.state_dir))
        self.snap = snap
        self.assessment = assess(snap, heartbeat, snap.now, policy)
        issues = self.page.issues if self.page is not None else ()
        for s in self.assessment.stalls:
            report = report_for(s)
            number = open_report(issues, report.title)
            outcome = "already-open" if number is not None else "would-file"
            self.filings[s.key] = Filing(s, report, outcome, number)
        self.trace.event(
            "ANNOUNCE",
            apply=self.apply,
            summary=self.assessment.summary(),
            heartbeat=heartbeat,
            snapshot=to_jsonable(snap),
            stalls=[to_jsonable(s) for s in self.assessment.stalls],
            quiet=[to_jsonable(q) for q in self.assessment.quiet],
            filings={k: f.outcome for k, f in self.filings.items()},
        )
        if not self.apply:
            return ()
        return tuple(f.stall for f in self.filings.values() if f.outcome == "would-file")

    def _one(self, item: Stall) -> Result:
        return file_report(self.ctx, self.filings[item.key].report)

    def land(self, item: Stall, result: Result) -> None:
        filing = self.filings[item.key]
        number = result.data.get("number")
        if not result.ok:
            outcome = "failed"
            self.ctx.warn(f"fleet: announce {filing.report.title!r}: {result.detail}")
        else:
            outcome = "filed" if result.data.get("filed") else "already-open"
        self.filings[item.key] = replace(
            filing,
            outcome=outcome,
            number=number if isinstance(number, int) else None,
            detail=result.detail,
        )

    def on_idle(self) -> bool:
        return False  # one pass per call; the timer is the loop

    def _with_capacity_issues(self, snap: Snapshot) -> Snapshot:
        """Add the issues dark workers' capacity files name when the page (open issues only) lacks
        them: their capacity markers date the darkness from the board, even once closed."""
        have = {i.number for i in snap.issues}
        wanted = sorted(
            {
                w.capacity.issue
                for w in snap.workers
                if w.capacity is not None and w.capacity.issue is not None
            }
            - have
        )
        extra: list[Issue] = []
        for n in wanted:
            try:
                issue = self.ctx.board.issue(n)
            except BoardError as exc:
                self.ctx.warn(f"fleet: announce: #{n} unreadable, darkness dated otherwise: {exc}")
                continue
            if issue is not None:
                extra.append(issue)
        return replace(snap, issues=snap.issues + tuple(extra)) if extra else snap


def file_report(ctx: FleetContext, report: Report) -> Result:
    """File ``report`` unless an open issue already carries its title — read from the live board
    now, never a cache: another announcer may have filed it since (D14)."""
    try:
        number = open_report(ctx.board.read().issues, report.title)
        if number is not None:
            return Result(True, f"already open as #{number}", data={"number": number})
        number = ctx.board.create_issue(
            report.title,
            report.body,
            labels=[ctx.inventory.policy.report_label],
            status=None,  # not queued (predicate 1), and held by its label (predicate 9)
        )
    except LabelsDropped as exc:  # the token cannot label: filing again files again (#11)
        return Result(False, f"{type(exc).__name__}: {exc}", Failure.REFUSE)
    except BoardError as exc:
        return Result(False, f"{type(exc).__name__}: {exc}", Failure.RETRY)
    return Result(True, f"filed #{number}", data={"number": number, "filed": True})


def tell_a_human(ctx: FleetContext, trace: Trace) -> Escalate:
    """The engine's ``escalate`` for a role that writes: each cannot-classify failure becomes one
    announcer report (seed 000: routed to a human, never guessed), filed at once and idempotent by
    title. A report that cannot be filed is said on stderr; the trace keeps the failure either way."""

    def escalate(escalations: Sequence[Escalation]) -> None:
        for e in escalations:
            stall = unclassified_stall(e.loop, e.item, e.detail)
            report = report_for(stall)
            result = file_report(ctx, report)
            trace.event(
                "ANNOUNCE-UNCLASSIFIED",
                loop=e.loop,
                item=e.item,
                title=report.title,
                ok=result.ok,
                detail=result.detail,
            )
            if not result.ok:
                ctx.warn(f"fleet: {e.loop}: a human was not told of {e.item}: {result.detail}")

    return escalate


def announce(ctx: FleetContext, *, apply: bool, trace: Trace | None = None) -> AnnounceReport:
    """One pass of the announcer. A dry run files nothing and says what it would file."""
    hold, apply, trace = begin(ctx, "announce", apply, trace)
    state = Path(ctx.inventory.state_dir)
    loop = Announcer(ctx, trace, apply=apply)
    escalate = tell_a_human(ctx, trace) if apply else None
    drain(loop, FileClaims(state / "claims"), trace, pool=1, key=lambda s: s.key, escalate=escalate)
    a = loop.assessment
    filings = list(loop.filings.values())
    # Ignored steering is named on its issue once; a halted fleet writes nothing (its snapshot's
    # assessment says halted), an unreadable board has nothing to name.
    told = Notifier(ctx, None if a.halted else loop.snap, apply=apply)
    drain(told, FileClaims(state / "claims"), trace, pool=1, key=notice_key)
    said = list(told.outcomes.values())
    if a.board_error:
        code = Exit.BOARD_UNREADABLE if apply else Exit.OK
        return AnnounceReport("failed", a, filings, code)
    if a.halted:
        return AnnounceReport("halted", a, filings)
    if not apply:
        return AnnounceReport("held" if hold is not None else "dry-run", a, filings, notices=said)
    # A stall still at would-file after an apply was skipped by the engine: another announcer on
    # this box held its claim and is filing it (its own re-read decides).
    filings = [
        replace(f, outcome="claimed-elsewhere") if f.outcome == "would-file" else f for f in filings
    ]
    if any(f.outcome == "failed" for f in filings) or any(n.outcome == "failed" for n in said):
        return AnnounceReport("failed", a, filings, Exit.WRITE_FAILED, said)
    filed = any(f.outcome == "filed" for f in filings) or any(n.outcome == "posted" for n in said)
    return AnnounceReport("filed" if filed else "nothing", a, filings, notices=said)
