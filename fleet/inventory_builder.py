"""Build an inventory as data and write it: the one builder behind every inventory a program makes.

``fleet/inventory.py`` reads and validates an inventory; this module makes one. The demo's
(``fleet/demo.py``), the integration tests' (``tests/integration/fleet_fixture.py``), the dispatch
bench's (``bench/dispatch_bench.py``) and the Docker harness's (``fleet/testing/harness.py``) are
all built by :func:`inventory`, so the four say the same thing the same way and a schema change is
made once. The committed ``inventory.yaml`` is not generated: it is written for a reader, with a
comment on every number.

The data is plain (mappings, lists, strings, numbers) in the committed file's key order. A field
given as ``None`` is left out, so the loader's default applies; a path is written as its string.
The embedded default's layout, one fleet under one directory, is :func:`under` and
:func:`local_worker`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from fleet.inventory import WORKER_KEYS

# An inventory as plain data: what fleet.inventory.loads reads once it is dumped.
InventoryData = dict[str, Any]
Fields = Mapping[str, object]

DEFAULT_IDENTITY = "fleet"  # the embedded board's marker author, as in inventory.yaml
DEFAULT_HALT_TITLE = "HALT FLEET"  # kill switch 2's issue title, as in inventory.yaml


def _plain(value: object) -> object:
    """A path as its string, a tuple as a list, a mapping as :func:`_fields`."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return _fields(value)
    return value


def _fields(fields: Fields) -> dict[str, object]:
    """A mapping of plain values, its ``None`` values left out (the loader's default applies)."""
    return {str(k): _plain(v) for k, v in fields.items() if v is not None}


def local_board(
    path: str | os.PathLike[str], origin: str | os.PathLike[str], *, identity: str | None = None
) -> dict[str, object]:
    """The embedded board: a SQLite file and the bare git origin its forge merges into."""
    return _fields({"kind": "local", "path": path, "origin": origin, "identity": identity})


def worker(name: str, *, transport: str = "local", **fields: object) -> dict[str, object]:
    """One worker's entry: its keys in the loader's order (``WORKER_KEYS``), ``None`` left out."""
    given: dict[str, object] = {"name": name, "transport": transport, **fields}
    known = [k for k in WORKER_KEYS if k in given] + [k for k in given if k not in WORKER_KEYS]
    return _fields({k: given[k] for k in known})


def inventory(
    *,
    board: Fields,
    lock: str | os.PathLike[str],
    halt: str | os.PathLike[str],
    state_dir: str | os.PathLike[str],
    workers: Iterable[Fields],
    lock_wait_s: float | None = None,
    lock_host: str | None = None,
    halt_issue_title: str | None = None,
    policy: Fields | None = None,
    trust: Fields | None = None,
) -> InventoryData:
    """An inventory (schema: ``fleet/inventory.py``) as data.

    ``board`` is :func:`local_board`'s mapping or a GitHub board's; ``lock`` and ``halt`` are the
    fleet lock's path and the halt file's; ``policy`` holds only the values that differ from the
    defaults; ``trust`` is left out when ``None`` (the board's default applies); each of
    ``workers`` is a mapping of worker fields (:func:`worker` makes one). ``None`` anywhere means
    "the loader's default".
    """
    data: InventoryData = {
        "board": _fields(board),
        "lock": _fields({"path": lock, "wait_s": lock_wait_s, "host": lock_host}),
        "halt": _fields({"file": halt, "issue_title": halt_issue_title}),
    }
    if policy is not None:
        data["policy"] = _fields(policy)
    if trust is not None:
        data["trust"] = _fields(trust)
    data["state_dir"] = os.fspath(state_dir)
    data["workers"] = [_fields(w) for w in workers]
    return data


def under(
    root: str | os.PathLike[str],
    workers: Iterable[Fields],
    *,
    lock_wait_s: float = 30,
    policy: Fields | None = None,
    trust: Fields | None = None,
) -> InventoryData:
    """The embedded default's fleet under the one directory ``root``, as ``inventory.yaml`` lays it
    out under ``.fleet/demo/``: the board, its origin, the lock, the halt file and the state."""
    d = Path(root)
    return inventory(
        board=local_board(d / "board.sqlite3", d / "origin.git", identity=DEFAULT_IDENTITY),
        lock=d / "fleet.lock",
        lock_wait_s=lock_wait_s,
        halt=d / "HALT",
        halt_issue_title=DEFAULT_HALT_TITLE,
        policy=policy,
        trust=trust,
        state_dir=d / "state",
        workers=workers,
    )


def local_worker(root: str | os.PathLike[str], name: str, **fields: object) -> dict[str, object]:
    """A local worker of :func:`under`'s fleet: its clone and state under ``root/workers/name``."""
    home = Path(root) / "workers" / name
    return worker(name, transport="local", clone=home / "clone", state_dir=home, **fields)


def _yaml_value(value: object) -> object:
    if isinstance(value, list):
        seq = CommentedSeq(_yaml_value(v) for v in value)
        if not any(isinstance(v, Mapping | list) for v in value):
            seq.fa.set_flow_style()  # path_prefix: [~/.local/bin], as the committed file writes it
        return seq
    if isinstance(value, Mapping):
        return CommentedMap((k, _yaml_value(v)) for k, v in value.items())
    return value


def dump(data: Fields, *, header: str = "") -> str:
    """``data`` as YAML text, block style in the committed file's indentation; ``header`` is a
    comment put above it, one ``# `` line per line of it."""
    yaml = YAML(typ="rt")
    yaml.width = 4096  # a long path stays on its line
    yaml.indent(mapping=2, sequence=4, offset=2)
    out = io.StringIO()
    for line in header.splitlines():
        out.write(f"# {line}".rstrip() + "\n")
    yaml.dump(_yaml_value(_fields(data)), out)
    return out.getvalue()


def write(path: str | os.PathLike[str], data: Fields, *, header: str = "") -> Path:
    """Write ``data`` (:func:`dump`) to ``path`` by rename, so a reader never sees half a file."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(dump(data, header=header), encoding="utf-8")
    tmp.replace(target)
    return target
