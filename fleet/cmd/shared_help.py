"""Help texts more than one task shows, written once: the ``--inventory`` flag, and the exit codes
of a dispatch, generated from :class:`fleet.core.exits.Exit` so the help cannot drift from the codes."""

from __future__ import annotations

from fleet.core.exits import Exit

INV = {"inventory": "inventory.yaml path (default: $FLEET_INVENTORY or ./inventory.yaml)"}

# What a dispatch can answer: the kill switches, pre-flight checks 1-10 and the fresh read's
# predicates (10-49), the board (50, 51) and the identity check (54), beside 0, 2 and 3.
_DISPATCH_RANGE = range(10, 52)
_RETIRED = frozenset({Exit.CI_RED})  # check 7 is advisory: no longer produced


def dispatch_exits() -> tuple[Exit, ...]:
    codes = [Exit.OK, Exit.USAGE, Exit.INVENTORY]
    codes += [e for e in Exit if e.value in _DISPATCH_RANGE and e not in _RETIRED]
    return (*codes, Exit.IDENTITY_MISMATCH)


def dispatch_help() -> str:
    cells = [f"{int(e):>2} {e.name.lower().replace('_', '-')}" for e in dispatch_exits()]
    width = max(len(c) for c in cells) + 2
    rows = [
        "  " + "".join(c.ljust(width) for c in cells[i : i + 3]).rstrip()
        for i in range(0, len(cells), 3)
    ]
    return (
        "Refuse or launch one issue through the one dispatch path (D15).\n\n"
        "Exit codes (each named in docs/dispatch.md and docs/operations.md):\n"
        + "\n".join(rows)
        + "\n"
    )
