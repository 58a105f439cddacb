"""``reap`` and ``repair``: thin I/O around the reaper and the oldest-wins repair (D4, D14)."""

from __future__ import annotations

from fleet.cmd.common import context, emit_json, fail
from fleet.core.exits import Exit
from fleet.core.reap import ReapState
from fleet.core.repair import ORDER, who
from fleet.core.select import age_text
from fleet.roles.reaper import ReapReport, reap
from fleet.roles.repairer import RepairReport, repair


def _mode(outcome: str, apply: bool) -> str:
    """The header word: a held --apply only reported, so it must not say "apply"."""
    if outcome == "held":
        return "held (reporting only, a pause or halt is on)"
    return "apply" if apply else "dry run"


def reap_lines(report: ReapReport, apply: bool) -> list[str]:
    """The operator's view: what was (or would be) reaped and why, and what was not and why."""
    mode = _mode(report.outcome, apply)
    head = (
        f"{mode}: reaper threshold {age_text(report.threshold_s)} ({report.threshold_s}s); "
        f"{len(report.decisions)} open start(s) without a terminal"
    )
    lines = [head]
    applied = apply and report.outcome != "held"
    if report.board_error:
        lines.append(f"  board unreadable: {report.board_error}")
    if report.lock_error:
        lines.append(f"  fleet lock: {report.lock_error}")
    for w in report.unchecked:
        lines.append(f"  could not check worker {w}")
    for d in report.decisions:
        if d.state == ReapState.REAP:
            done = d.issue in report.reaped
            verb = "reaped" if done else ("would reap" if not applied else "not reaped")
            lines.append(f"  #{d.issue}: {verb} — {d.why}")
        else:
            lines.append(f"  #{d.issue}: not reaped ({d.state}) — {d.why}")
    lines += [f"  {line}" for line in (*report.skipped, *report.failures)]
    return lines


def repair_lines(report: RepairReport, apply: bool) -> list[str]:
    """Who is (or would be) kept and why, and who is stopped."""
    mode = _mode(report.outcome, apply)
    lines = [f"{mode}: {len(report.decisions)} issue(s) with more than one live unit", f"  {ORDER}"]
    applied = apply and report.outcome != "held"
    if report.lock_error:
        lines.append(f"  fleet lock: {report.lock_error}")
    for w in report.unchecked:
        lines.append(f"  could not check worker {w}: a unit there is not in this decision")
    for d in report.decisions:
        if d.keep is None:
            lines.append(f"  #{d.issue}: {d.why}")
            continue
        verb = "stop" if applied else "would stop"
        stops = ", ".join(who(u) for u in d.stop)
        lines.append(f"  #{d.issue}: keep {who(d.keep)}, {verb} {stops} — {d.why}")
    lines += [f"  {tag}: stopped, superseded marker posted" for tag in report.stopped]
    lines += [f"  {tag}: had already ended; its own terminal stands" for tag in report.ended]
    lines += [f"  {line}" for line in report.failures]
    return lines


def _show(name: str, report: ReapReport | RepairReport, lines: list[str], as_json: bool) -> None:
    if as_json:
        emit_json(report.to_json())
    else:
        print("\n".join(lines))
    if report.exit is not Exit.OK:
        raise fail(report.exit, f"{name} {report.outcome}")


def reap_cmd(inv: str | None, apply: bool, as_json: bool) -> None:
    with context(inv, writes=apply) as ctx:
        report = reap(ctx, apply=apply)
    _show("reap", report, reap_lines(report, apply), as_json)


def repair_cmd(inv: str | None, apply: bool, as_json: bool) -> None:
    with context(inv, writes=apply) as ctx:
        report = repair(ctx, apply=apply)
    _show("repair", report, repair_lines(report, apply), as_json)
