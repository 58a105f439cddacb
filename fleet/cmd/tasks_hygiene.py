"""invoke tasks for the hygiene commands; tasks.py adds every task in ``TASKS`` to the top level."""

from __future__ import annotations

from invoke import Task

TASKS: tuple[Task, ...] = ()
