"""invoke tasks for the hygiene commands;
``fleet.cmd.collection`` adds every task in ``TASKS`` to the top level.

The roles that keep an unattended fleet honest (D4, D14): each a thin wrapper, dry run by default;
the work is in fleet.cmd.hygiene, fleet.roles.* and the pure fleet.core.reap / fleet.core.repair.
"""

from __future__ import annotations

from invoke import Task, task

from fleet.cmd.shared_help import INV

REAP_HELP = """Reset orphaned work (D14): starts that no run will ever close out.

Reaped only when: the last word is a start, no live unit on ANY worker, and the start is older
than the reaper threshold. Dry run by default: prints what would be reaped and why, and what is not
and why (live / too-young / could-not-check). An unreachable worker blocks every reap.

Exit codes: 0 done (or dry run)   44 fleet lock held past its wait   50 board unreadable (--apply)
  51 a reaped marker was not posted
"""


@task(
    help={**INV, "apply": "post the reaped markers (default: dry run)", "json": "one JSON object"}
)
def reap(c, apply=False, json=False, inventory=None):
    from fleet.cmd.hygiene import reap_cmd

    reap_cmd(inventory, apply, json)


reap.__doc__ = REAP_HELP

REPAIR_HELP = """Oldest wins (D4): keep the oldest of duplicate live units, stop the others.

When live units for one issue coexist, stop all but the oldest (whole process tree), each with a superseded marker that is not a failure. Dry run by
default: prints who would be kept and why. Holds the fleet lock across the probe and the stops.

Exit codes: 0 done (or dry run)   44 fleet lock held past its wait   51 a superseded marker failed
  62 a duplicate could not be stopped   63 undecided: a start time the order needs is unknown
"""


@task(help={**INV, "apply": "stop the duplicates (default: dry run)", "json": "one JSON object"})
def repair(c, apply=False, json=False, inventory=None):
    from fleet.cmd.hygiene import repair_cmd

    repair_cmd(inventory, apply, json)


repair.__doc__ = REPAIR_HELP

ANNOUNCE_HELP = """File one report issue per stall nobody is coming for (D14); dry run by default.

Announced: a start past the reaper threshold the reaper cannot check (a worker unreachable); a
tombstone; a parked item long past its due time; a dark worker past its stated reset, or with none
for too long; a sweeper heartbeat older than two timer periods, or none. Never announced: running,
blocked, held (label, park latch, assignee), parked before due, fixtures, reports, a halted fleet.
One report per stall, by title, against the live board's open issues.

Exit codes: 0 done (or dry run)   50 board unreadable (--apply)   51 a report was not filed
"""


@task(help={**INV, "apply": "file the reports (default: dry run)", "json": "one JSON object"})
def announce(c, apply=False, json=False, inventory=None):
    from fleet.cmd.announce import announce_cmd

    announce_cmd(inventory, apply, json)


announce.__doc__ = ANNOUNCE_HELP

TASKS: tuple[Task, ...] = (
    reap,
    repair,
    announce,
)
