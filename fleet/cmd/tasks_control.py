"""invoke tasks for the control commands;
``fleet.cmd.collection`` adds every task in ``TASKS`` to the top level.

The operator's switches (halt/resume, pause/unpause, drain/undrain) and cancel. Thin wrappers: the
work is in fleet.cmd.control, fleet.control.switches, fleet.control.cancel and fleet.control.drain.
"""

from __future__ import annotations

from invoke import Task, task

from fleet.cmd.shared_help import INV

WHO = {"author": "who is setting it (default: $USER)"}


def _clearing(name: str, switch: str, doc: str) -> Task:
    """The task that ends PAUSE or DRAIN: one command on two flag files (``clear_flag`` removes
    the file and names the switches still on). ``switch`` is the ``SwitchName`` value, so this
    module loads no switch code until the task runs."""

    def body(c, inventory=None):
        from fleet.cmd.control import clear_flag
        from fleet.control.switches import SwitchName

        clear_flag(inventory, SwitchName(switch))

    body.__doc__ = doc
    return Task(body, name=name, help=INV)


@task(help={**INV, **WHO, "reason": "why (required: printed on every halt line)"})
def halt(c, reason, author=None, inventory=None):
    """Write the halt file: nothing is dispatched until `resume` (the first kill switch)."""
    from fleet.cmd.control import halt as run

    run(inventory, reason, author)


@task(help=INV)
def resume(c, inventory=None):
    """Remove the halt file; says whether one was there and which switches are still on."""
    from fleet.cmd.control import resume as run

    run(inventory)


@task(help={**INV, **WHO, "reason": "why (printed by fleet-status)"})
def pause(c, reason="", author=None, inventory=None):
    """A hold in which only cancels are decided: live runs go on, nothing new starts."""
    from fleet.cmd.control import pause as run

    run(inventory, reason, author)


unpause = _clearing("unpause", "PAUSE", "End the pause.")


@task(
    help={
        **INV,
        **WHO,
        "reason": "why (printed by fleet-status)",
        "wait": "poll until idle for at most this many seconds; exit 61 if it is not",
        "poll": "seconds between polls with --wait (default 5)",
        "json": "print the idle verdict as one JSON object last",
    }
)
def drain(c, reason="", author=None, wait=None, poll=None, json=False, inventory=None):
    """Stop dispatching new work, let in-flight runs finish, and report whether the fleet is idle.

    Idle = no unit live, nothing parked or in flight, every worker checked (seed 001 §13).
    Exit codes: 0 drain set (and, with --wait, idle); 61 --wait gave up while not idle.
    """
    from fleet.cmd.control import drain as run

    run(
        inventory,
        reason,
        author,
        float(wait) if wait is not None else None,
        float(poll) if poll is not None else None,
        json,
    )


undrain = _clearing("undrain", "DRAIN", "End the drain: dispatching resumes.")


@task(
    help={
        **INV,
        **WHO,
        "issue": "issue number",
        "reason": "why (goes into the cancelled marker)",
        "json": "print one JSON object last",
    }
)
def cancel(c, issue, reason=None, author=None, json=False, inventory=None):
    """Stop task-N wherever it runs, then post a cancelled marker: no retry, no recovery.

    The stop takes the unit's whole process tree. Decided always, even while halted, paused or
    draining.

    Exit codes: 0 stopped (or nothing was live) and the marker posted; 67 a worker could not be
    checked, the unit may still be live there; 68 a live unit did not stop; 51 the marker was not
    posted; 44 the fleet lock was held past its wait; 21 no such issue.
    """
    from fleet.cmd.control import cancel as run

    run(inventory, int(issue), reason, author, json)


TASKS: tuple[Task, ...] = (halt, resume, pause, unpause, drain, undrain, cancel)
