"""What every keeping-honest role (reap, repair, announce) does around its Loop, written once.

Two rules: a pause or the halt file turns ``--apply`` into a report that writes nothing (only
cancels are decided while paused, seed 001 §10), and a role that writes runs its whole drain under
the fleet lock, so no dispatch can probe and launch between its probe and its write (D4).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet.context import FleetContext
from fleet.control.switches import Switch, hold_line, role_hold
from fleet.dispatch import fleet_lock
from fleet.lock import LockTimeout
from fleet.roles.engine import FileClaims, Loop, drain
from fleet.trace import Trace

WRITE_POOL = 4  # dispatch calls in flight while writing; a dry run decides one at a time


def held(ctx: FleetContext, role: str, apply: bool) -> Switch | None:
    """The switch that holds this ``--apply`` run, said on stderr; None when it may write."""
    hold = role_hold(ctx.inventory) if apply else None
    if hold is not None:
        ctx.warn(hold_line(role, hold))
    return hold


def begin(
    ctx: FleetContext, role: str, apply: bool, trace: Trace | None
) -> tuple[Switch | None, bool, Trace]:
    """The start of one tick of ``role``: the switch that holds it (see :func:`held`), whether it
    writes, and its trace (the state directory's unless one is given)."""
    hold = held(ctx, role, apply)
    writes = apply and hold is None  # a pause or a halt: decide and report, write nothing
    return hold, writes, trace or Trace(Path(ctx.inventory.state_dir) / "trace.jsonl")


def drain_role(
    ctx: FleetContext, loop: Loop[Any], trace: Trace, *, apply: bool, key: Callable[[Any], str]
) -> str | None:
    """Drain ``loop`` once — under the fleet lock when it writes; the lock's timeout, or None."""
    claims = FileClaims(Path(ctx.inventory.state_dir) / "claims")
    try:
        if apply:
            from fleet.roles.announcer import tell_a_human  # the announcer is itself a role

            with fleet_lock(ctx):
                escalate = tell_a_human(ctx, trace)
                drain(loop, claims, trace, pool=WRITE_POOL, key=key, escalate=escalate)
        else:
            drain(loop, claims, trace, pool=1, key=key)
    except LockTimeout as exc:
        return str(exc)
    return None
