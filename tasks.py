"""fleet's invoke tasks: thin wrappers only; every decision lives in ``fleet/``.

``invoke X`` and ``fleet X`` are the same command (``fleet`` is an invoke Program over this
collection). Every task takes ``--inventory`` (default: $FLEET_INVENTORY or ./inventory.yaml).
"""

from __future__ import annotations

from invoke import Collection, task

from fleet.cmd import tasks_control, tasks_harness, tasks_hygiene, tasks_replay
from fleet.cmd.taskguard import guard

INV = {"inventory": "inventory.yaml path (default: $FLEET_INVENTORY or ./inventory.yaml)"}


# -- the queue --------------------------------------------------------------------------------
@task(
    help={
        **INV,
        "apply": "dispatch the plan (default: dry run, print it)",
        "json": "one JSON object",
        "timeline": "after the tick, rewrite <state_dir>/timeline.html (the last 24h)",
    }
)
def schedule(c, apply=False, json=False, timeline=False, inventory=None):
    """The sweeper: read the board once, probe the fleet once, plan, and (with --apply) dispatch."""
    from fleet.cmd.sched import schedule as run

    run(inventory, apply, json, timeline)


@task(
    help={
        **INV,
        "json": "one JSON object",
        "no_probe": "do not file the fixture-labelled probe issue (skips the write check)",
    }
)
def doctor(c, json=False, no_probe=False, inventory=None):
    """Every check a first run depends on: a pass/fail line each, its reason and its fix."""
    from fleet.cmd.doctor import doctor as run

    run(inventory, json, not no_probe)


@task(
    name="fleet-status",
    help={
        **INV,
        "json": "one JSON object",
        "issue": "only this issue",
        "cost": "also what reading the board cost: this read, the budget left, recent sweeps (D1)",
        "watch": "redraw until Ctrl-C: in place on a terminal, plain lines elsewhere",
        "every": "seconds between redraws with --watch (default 10, at least 1: each is a board read)",
    },
)
def fleet_status(c, json=False, issue=None, cost=False, watch=False, every=None, inventory=None):
    """Every worker and every open issue, each with its state and why it is not moving."""
    from fleet.cmd.sched import status, watch_status

    number = int(issue) if issue else None
    if watch and json:
        from fleet.cmd.common import fail
        from fleet.exits import Exit

        raise fail(Exit.USAGE, "fleet-status: --watch redraws text; --json prints one object")
    if watch:
        watch_status(inventory, number, cost, float(every) if every else None)
        return
    status(inventory, json, number, show_cost=cost)


@task(
    help={
        **INV,
        "since": "how far back: 90m, 24h, 7d (default 24h)",
        "issue": "only this issue's runs",
        "out": "the HTML page to write (default: <state_dir>/timeline.html)",
        "png": "also draw it as a PNG beside the page (headless Chromium)",
    }
)
def timeline(c, since="24h", issue=None, out=None, png=False, inventory=None):
    """The fleet's runs as a picture: one lane per worker, a bar per run coloured by its outcome,
    capacity-dark periods, sweeps, halts/pauses/drains; one self-contained HTML page."""
    from fleet.cmd.timeline import timeline as run

    run(inventory, since, int(issue) if issue else None, out, png)


DISPATCH_HELP = """Refuse or launch one issue through the one dispatch path (D15).

Exit codes (fleet/exits.py; docs/dispatch.md):
  0 launched (or dry run passed)   10 halt file   11 halt issue   12 paused   13 draining
  21 no such issue (check 1)        22 closed (2)  23 do-not-dispatch title (3, comments once)
  24 worker dark: rate limit (4)    25 worker dark: revoked (4)     26 open blocker (5)
  28 CI red (7)   30 unreachable (8)   31 no permission (8)   32 no runner (8)   33 clone unsynced (9)
  46 task-N live on another worker or master (6, seen under the fleet lock)
  41 unit live on this worker (10)  42 name held by a finished unit (10)  43 supervisor failed (10)
  49 claim sent, no answer: the unit may be live (10)   44 fleet lock held past its wait
  45 no such worker   47 every reachable worker is dark (4)   48 no worker reachable (8)
  50 board unreadable   51 a board write failed
"""


@task(
    help={
        **INV,
        "issue": "issue number",
        "worker": "worker name (default: lane first, then any healthy)",
        "dry_run": "run every check, launch nothing",
        "json": "print one JSON object last",
        "ignore_ci": "silence check 7's red-baseline warning (check 7 is advisory: it never refuses)",
    }
)
def dispatch(c, issue, worker=None, dry_run=False, json=False, ignore_ci=False, inventory=None):
    from fleet.cmd.sched import dispatch_cmd

    dispatch_cmd(inventory, int(issue), worker, dry_run, json, ignore_ci)


dispatch.__doc__ = DISPATCH_HELP


@task(
    help={
        "keep": "keep .fleet/demo from the last run instead of starting fresh",
        "agent": "the CLI the stand-in agent speaks: claude (default), codex, gemini or plain",
    }
)
def demo(c, keep=False, agent="claude"):
    """Run the main job on the embedded default: file sample issues and drain them until idle."""
    from fleet.cmd.common import fail
    from fleet.demo import DemoRefused, run_demo
    from fleet.exits import Exit

    try:
        run_demo(keep=keep, agent=agent)
    except DemoRefused as exc:
        raise fail(Exit.USAGE, str(exc)) from None


@task(
    help={
        "k": "pytest -k expression",
        "docker": "run the Docker harness tests when an engine answers (--no-docker: skip them)",
    }
)
def test(c, k=None, docker=True):
    """Check the rules (ruff, the import-linter layers), install Debian's chromium when missing (the
    timeline's browser tests) and sshd (the SSH transport tests start a real one), then run the
    test suite (pytest); with a Docker engine, build the harness image (or reuse it) and run the
    harness tests too (tests/docker: FLEET_DOCKER=1)."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    from fleet.cmd.tasks_harness import docker_tests_env
    from fleet.cmd.testdeps import ssh_tests_env
    from fleet.timeline import browser

    # The layers and the lint are rules of the codebase, so a break fails the suite like a test.
    c.run(f"{shlex.quote(sys.executable)} -m ruff check .", pty=False)
    lint_imports = Path(sys.executable).parent / "lint-imports"  # installed beside this python
    c.run(shlex.quote(str(lint_imports)), pty=False)
    try:  # the timeline's browser tests open pages in Debian's headless Chromium
        browser.ensure(print)
    except (OSError, subprocess.SubprocessError, browser.BrowserError) as exc:
        print(f"chromium could not be installed ({exc}): the timeline browser tests will fail")
    args = [sys.executable, "-m", "pytest", "-q"]
    if k:
        args += ["-k", k]
    # sshd first, as the harness installs mmdebstrap: the SSH transport tests start a real one.
    env = ssh_tests_env(lambda line: print(line, flush=True))
    env.update(docker_tests_env() if docker else {})
    c.run(" ".join(shlex.quote(a) for a in args), pty=False, env=env)


# -- board.* ------------------------------------------------------------------------------------
@task(
    name="add",
    iterable=["label", "assignee"],
    help={
        **INV,
        "title": "issue title",
        "body": "issue body",
        "label": "a label (repeatable)",
        "lane": "worker lane",
        "assignee": "assignee (repeatable)",
        "status": "Todo | In progress | Done",
        "fixture": "apply the fixture label at filing (predicate 9)",
        "author": "author",
    },
)
def board_add(
    c,
    title,
    body="",
    label=None,
    lane=None,
    assignee=None,
    status="Todo",
    fixture=False,
    author=None,
    inventory=None,
):
    """File an issue; prints its number."""
    from fleet.cmd.board import add

    add(inventory, title, body, label or [], lane, assignee or [], status, fixture, author)


@task(name="show", help={**INV, "json": "one JSON object"})
def board_show(c, number, json=False, inventory=None):
    """Show one issue with its comments and markers."""
    from fleet.cmd.board import show

    show(inventory, int(number), json)


@task(
    name="list",
    help={**INV, "state": "open | closed", "json": 'one JSON object: {"issues": [...]}'},
)
def board_list(c, state=None, json=False, inventory=None):
    """List issues."""
    from fleet.cmd.board import list_

    list_(inventory, state, json)


@task(name="comment", help={**INV, "author": "comment author (default operator)"})
def board_comment(c, number, body, author=None, inventory=None):
    """Comment on an issue (a line starting 'fleet:release' releases a latch)."""
    from fleet.cmd.board import comment

    comment(inventory, int(number), body, author)


def _write(op):
    def run(c, number, value=None, inventory=None):
        from fleet.cmd.board import write

        write(inventory, int(number), op, value)

    return run


@task(name="label", iterable=["label"], help=INV)
def board_label(c, number, label=None, inventory=None):
    """Add labels: board.label N --label hold [--label x]."""
    from fleet.cmd.board import write

    write(inventory, int(number), "label", label or [])


@task(name="unlabel", help=INV)
def board_unlabel(c, number, label, inventory=None):
    """Remove one label."""
    _write("unlabel")(c, number, label, inventory)


@task(name="assign", iterable=["who"], help=INV)
def board_assign(c, number, who=None, inventory=None):
    """Set assignees (none = unassign)."""
    from fleet.cmd.board import write

    write(inventory, int(number), "assign", who or [])


@task(name="block", help={**INV, "by": "the blocking issue", "remove": "remove the edge"})
def board_block(c, number, by, remove=False, inventory=None):
    """Add (or --remove) a blocked-by edge: NUMBER is blocked by --by."""
    _write("unblock" if remove else "block")(c, number, by, inventory)


@task(name="parent", help={**INV, "parent": "parent issue (0 = none)"})
def board_parent(c, number, parent, inventory=None):
    """Set an issue's parent (sub-issues)."""
    _write("parent")(c, number, parent, inventory)


@task(name="status", help=INV)
def board_status(c, number, status, inventory=None):
    """Set the Status field (Todo, In progress, Done): predicate 1 reads it."""
    _write("status")(c, number, status, inventory)


@task(name="lane", help=INV)
def board_lane(c, number, lane="", inventory=None):
    """Set or clear an issue's lane (which box)."""
    _write("lane")(c, number, lane, inventory)


@task(name="close", help={**INV, "reason": "completed | not_planned"})
def board_close(c, number, reason="completed", inventory=None):
    """Close an issue with a state reason."""
    _write("close")(c, number, reason, inventory)


@task(name="reopen", help=INV)
def board_reopen(c, number, inventory=None):
    """Reopen an issue (a reopen outranks every older marker, D6)."""
    _write("reopen")(c, number, None, inventory)


@task(name="ci", help={**INV, "red": "set CI red", "green": "set CI green"})
def board_ci(c, red=False, green=False, inventory=None):
    """Show or set the CI state of origin main (pre-flight check 7)."""
    from fleet.cmd.board import ci

    ci(inventory, "red" if red else "green" if green else None)


# -- pr.* (for agents, on the local forge) -------------------------------------------------------
@task(
    name="create",
    help={
        **INV,
        "branch": "a branch pushed to origin",
        "title": "PR title",
        "body": "PR body (put the closing reference here)",
    },
)
def pr_create(c, branch, title, body="", author=None, inventory=None):
    """Open a PR on the local forge; prints its number."""
    from fleet.cmd.board import pr_create as run

    run(inventory, branch, title, body, author)


@task(name="merge", help=INV)
def pr_merge(c, number, merged_by=None, inventory=None):
    """Merge a PR into origin main (a real git merge); closes the issues it references."""
    from fleet.cmd.board import pr_merge as run

    run(inventory, int(number), merged_by)


# -- inventory.* --------------------------------------------------------------------------------
@task(name="check", help=INV)
def inventory_check(c, inventory=None):
    """Validate the inventory (errors name file:line:column)."""
    from fleet.cmd.common import inventory as load

    inv = load(inventory)
    print(f"{inv.path}: ok, {len(inv.workers)} worker(s): {', '.join(w.name for w in inv.workers)}")


@task(
    name="add-worker",
    iterable=["path_prefix"],
    help={
        **INV,
        "name": "worker name",
        "transport": "local | ssh",
        "host": "ssh host",
        "port": "ssh port",
        "master": "unix user",
        "lane": "lane (default: name)",
    },
)
def inventory_add_worker(
    c,
    name,
    transport="ssh",
    host=None,
    port=None,
    master=None,
    lane=None,
    clone=None,
    agent=None,
    key=None,
    known_hosts=None,
    path_prefix=None,
    inventory=None,
):
    """Add a worker, keeping the file's comments and order."""
    from fleet.cmd.inv import add_worker

    add_worker(
        inventory,
        name=name,
        transport=transport,
        host=host,
        port=port,
        master=master,
        lane=lane,
        clone=clone,
        agent=agent,
        key=key,
        known_hosts=known_hosts,
        path_prefix=path_prefix,
    )


board = Collection(
    "board",
    board_add,
    board_show,
    board_list,
    board_comment,
    board_label,
    board_unlabel,
    board_assign,
    board_block,
    board_parent,
    board_status,
    board_lane,
    board_close,
    board_reopen,
    board_ci,
)
pr = Collection("pr", pr_create, pr_merge)
inventory_ns = Collection("inventory", inventory_check, inventory_add_worker)
ns = Collection(
    schedule, doctor, fleet_status, timeline, dispatch, demo, test, board, pr, inventory_ns
)
# The keeping-honest roles, the operator's switches and replay live in their own modules, each
# owning its tasks; the harness is its own collection.
for _task in (*tasks_hygiene.TASKS, *tasks_control.TASKS, *tasks_replay.TASKS):
    ns.add_task(_task)
ns.add_collection(tasks_harness.harness)
# Last, over everything above: --help never runs a task, --json always ends in one JSON object.
guard(ns)
