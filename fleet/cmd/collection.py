"""The one invoke collection: ``invoke X`` (through the repository's ``tasks.py``) and ``fleet X``
(the console script, ``fleet.cmd.cli``) serve this namespace, so they are one command.

Each ``tasks_*`` module owns its tasks; this module only gathers them, then guards them all:
``--help`` never runs a task, and ``--json`` always ends in one JSON object (``taskguard``).
"""

from __future__ import annotations

from invoke import Collection

from fleet.cmd import (
    tasks_board,
    tasks_control,
    tasks_harness,
    tasks_hygiene,
    tasks_queue,
    tasks_replay,
)
from fleet.cmd.taskguard import guard

ns = Collection()
for _task in (
    *tasks_queue.TASKS,
    *tasks_hygiene.TASKS,
    *tasks_control.TASKS,
    *tasks_replay.TASKS,
):
    ns.add_task(_task)
for _coll in (*tasks_board.COLLECTIONS, tasks_harness.harness):
    ns.add_collection(_coll)
# Last, over everything above.
guard(ns)
