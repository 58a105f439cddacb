"""``halt``/``resume``, ``pause``/``unpause``, ``drain``/``undrain`` and ``cancel``: thin I/O around
fleet.control.switches, fleet.control.cancel and fleet.control.drain. Every line printed says what changed and what did
not, so an operator never has to guess which switch is still on."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from fleet.cmd.common import context, emit_json, fail, inventory, say
from fleet.control.cancel import cancel as cancel_issue
from fleet.control.drain import POLL_S, observe_idle, wait_idle
from fleet.control.switches import (
    Switch,
    SwitchName,
    flag_path,
    halt_path,
    operator,
    read_switch,
    remove_switch,
    write_switch,
)
from fleet.core.exits import Exit
from fleet.core.idle import IdleVerdict
from fleet.core.select import age_text, issue_halts
from fleet.inventory import Inventory
from fleet.views.progress import Meter


def describe(s: Switch, now: datetime | None = None) -> str:
    """``<name> <path> set by X, 5m ago: reason`` — the halt line's shape for every switch."""
    now = now or datetime.now(UTC)
    age = f", {age_text(max(0, int((now - s.since).total_seconds())))} ago" if s.since else ""
    who = f" by {s.author}" if s.author else ""
    return f"{s.name} {s.path} set{who}{age}: {s.reason or 'no reason was recorded'}"


def _other_switches(inv: Inventory, skip: SwitchName) -> list[str]:
    """The switches still on after one was turned off: resuming a halt does not end a pause."""
    out = []
    for name, path in (
        (SwitchName.HALT_FILE, halt_path(inv)),
        (SwitchName.PAUSE, flag_path(inv, SwitchName.PAUSE)),
        (SwitchName.DRAIN, flag_path(inv, SwitchName.DRAIN)),
    ):
        s = read_switch(name, path)
        if s is not None and name != skip:
            out.append(f"still on: {describe(s)}")
    return out


# -- halt / resume -------------------------------------------------------------------------------
def halt(inv_path: str | None, reason: str, author: str | None) -> None:
    inv = inventory(inv_path)
    if not reason.strip():
        raise fail(
            Exit.USAGE,
            "halt needs --reason: an unexplained global stop is the one state nobody can "
            "safely act on (seed 003)",
        )
    path = halt_path(inv)
    before = read_switch(SwitchName.HALT_FILE, path)
    s = write_switch(SwitchName.HALT_FILE, path, reason, operator(author))
    if before is not None:
        print(f"replaced: {describe(before)}")
    print(f"halted: {describe(s)}")
    print("nothing is dispatched until `invoke resume`; runs already live go on (cancel stops one)")


def resume(inv_path: str | None) -> None:
    inv = inventory(inv_path)
    path = halt_path(inv)
    before = read_switch(SwitchName.HALT_FILE, path)
    if remove_switch(path) and before is not None:
        print(f"resumed: removed {describe(before)}")
    else:
        print(f"no halt file at {path}: nothing to remove")
    for line in _other_switches(inv, SwitchName.HALT_FILE):
        say(line)
    try:
        with context(inv_path) as ctx:
            page = ctx.board.read()
    except Exception as exc:  # a courtesy check only: resume has done its job either way
        print(f"halt issue not checked (board unreadable: {exc})", file=sys.stderr)
        return
    for h in issue_halts(page.issues, inv.policy):
        print(f"still halted by issue {h.where} ({inv.policy.halt_title!r}): close it to resume")


# -- pause / drain -------------------------------------------------------------------------------
def set_flag(inv_path: str | None, name: SwitchName, reason: str, author: str | None) -> Switch:
    inv = inventory(inv_path)
    path = flag_path(inv, name)
    before = read_switch(name, path)
    if before is not None and not reason.strip():
        return before  # set again without a reason (drain --wait to watch): keep who and why
    s = write_switch(name, path, reason, operator(author))
    if before is not None:
        print(f"replaced: {describe(before)}")
    return s


def clear_flag(inv_path: str | None, name: SwitchName) -> None:
    inv = inventory(inv_path)
    path = flag_path(inv, name)
    before = read_switch(name, path)
    if remove_switch(path) and before is not None:
        print(f"removed: {describe(before)}")
    else:
        print(f"{name} was not set ({path}): nothing to remove")
    for line in _other_switches(inv, name):
        say(line)


def pause(inv_path: str | None, reason: str, author: str | None) -> None:
    s = set_flag(inv_path, SwitchName.PAUSE, reason, author)
    print(f"paused: {describe(s)}")
    print(
        "a hold, not a halt: only cancels are decided; runs already live go on, nothing new "
        "starts, until `invoke unpause`"
    )


def drain(
    inv_path: str | None,
    reason: str,
    author: str | None,
    wait: float | None,
    poll: float | None,
    as_json: bool,
) -> None:
    s = set_flag(inv_path, SwitchName.DRAIN, reason, author)
    print(f"draining: {describe(s)}")
    print("no new work starts; in-flight runs finish; `invoke undrain` resumes dispatching")
    with context(inv_path) as ctx:
        if wait is None:
            verdict, polls = observe_idle(ctx), 1
        else:
            # Progress on stderr (stdout keeps the verdict and the --json object): redrawn in
            # place on a terminal, one line per change of what is still out elsewhere.
            with Meter(f"drain: waiting up to {wait:g}s for idle", out=sys.stderr) as meter:

                def observe() -> IdleVerdict:
                    v = observe_idle(ctx)
                    meter.update(None, v.line())
                    return v

                res = wait_idle(observe, wait, poll_s=poll or POLL_S)
            verdict, polls = res.verdict, res.polls
    say(verdict.line())
    if as_json:
        emit_json({**verdict.to_json(), "draining": True, "polls": polls})
    if wait is not None and not verdict.idle:
        raise fail(Exit.NOT_IDLE, f"drain: gave up after {wait:g}s: {verdict.line()}")


# -- cancel --------------------------------------------------------------------------------------
def cancel(
    inv_path: str | None, issue: int, reason: str | None, author: str | None, as_json: bool
) -> None:
    with context(inv_path, writes=True) as ctx:
        report = cancel_issue(ctx, issue, author=operator(author), reason=reason or None)
    for line in report.lines():
        say(line)
    if as_json:
        emit_json(report.to_json())
    if report.code is not Exit.OK:
        raise fail(report.code, "")
