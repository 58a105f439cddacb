"""invoke tasks for the board (``board.*``), the local forge's PRs (``pr.*``) and the inventory
(``inventory.*``): each a collection of its own."""

from __future__ import annotations

from invoke import Collection, task

from fleet.cmd.shared_help import INV


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
inventory = Collection("inventory", inventory_check, inventory_add_worker)

COLLECTIONS: tuple[Collection, ...] = (board, pr, inventory)
