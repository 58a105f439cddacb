"""``announce``: thin I/O around the announcer role (``fleet.roles.announcer``)."""

from __future__ import annotations

from invoke.exceptions import Exit as InvokeExit

from fleet.cmd.common import context, emit_json, fail, say
from fleet.core.exits import Exit
from fleet.roles.announcer import AnnounceReport, announce


def render(report: AnnounceReport, apply: bool) -> str:
    """What would be (or was) filed, and what is deliberately not announced and why."""
    a = report.assessment
    head = f"apply: {report.outcome}" if apply else "dry run"
    lines = [f"{head}: {a.summary()}"]
    verbs = {
        "would-file": "would file",
        "filed": "filed",
        "already-open": "already open",
        "claimed-elsewhere": "being filed by another announcer",
        "failed": "FAILED to file",
    }
    for f in report.filings:
        where = f" as #{f.number}" if f.number is not None else ""
        lines.append(f"  {verbs.get(f.outcome, f.outcome)}{where}: {f.report.title}")
        lines.append(f"      {f.stall.detail}")
        if f.outcome == "failed":
            lines.append(f"      {f.detail}")
    for n in report.notices:  # ignored steering, named once on its own issue (fleet.core.notices)
        word = {"would-post": "would name", "posted": "named", "already-posted": "already named",
                "failed": "FAILED to name"}.get(n.outcome, n.outcome)  # fmt: skip
        lines.append(
            f"  {word} on #{n.notice.issue}: not obeyed: {n.notice.subject}: {n.notice.why}"
        )
    if a.quiet:
        lines.append("not announced (the mechanism working, or not yet a stall):")
        for q in a.quiet:
            lines.append(f"  {q.subject:<14} {q.state:<14} {q.why}")
    return "\n".join(lines)


def announce_cmd(inv: str | None, apply: bool, as_json_: bool) -> None:
    try:
        ctx = context(inv, writes=apply)
    except InvokeExit as exc:
        if exc.code != Exit.BOARD_UNREADABLE or apply:
            raise  # D5: --apply fails closed; nothing can be matched by title without the board
        if as_json_:
            emit_json({"outcome": "dry-run", "code": 0, "board_error": str(exc.message)})
        else:
            print(f"dry run: {exc.message}; nothing can be judged")
        return
    with ctx:
        report = announce(ctx, apply=apply)
    if as_json_:
        emit_json(report.to_json())
    else:
        say(render(report, apply))
    if report.exit is not Exit.OK:
        raise fail(report.exit, f"announce {report.outcome}: {report.assessment.summary()}")
