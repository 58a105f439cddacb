"""``inventory.add-worker``: converts the CLI's strings, then the round-trip edit keeps comments."""

from __future__ import annotations

from fleet.cmd.common import fail
from fleet.core.exits import Exit
from fleet.inventory import InventoryError, default_path
from fleet.inventory import add_worker as _add


def add_worker(inv: str | None, **given: object) -> None:
    fields = {k: v for k, v in given.items() if v not in (None, [], "")}
    if "port" in fields:
        try:
            fields["port"] = int(str(fields["port"]))
        except ValueError:
            raise fail(Exit.USAGE, f"--port must be an integer, got {fields['port']!r}") from None
    path = inv or str(default_path())
    try:
        _add(path, fields)
    except InventoryError as exc:
        raise fail(Exit.INVENTORY, str(exc)) from None
    print(f"{path}: added worker {fields['name']}")
