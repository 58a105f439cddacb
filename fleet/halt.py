"""The halt file: the first kill switch (seed 003). Its contents say why and who; its age is its mtime.

An empty or reasonless file still halts — the switch must never depend on the setter remembering —
but every halt line says that no reason was recorded, because an unexplained global stop is the one
state nobody can safely act on.
"""

from __future__ import annotations

import getpass
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

from fleet.model import Halt, iso


def read_halt_file(path: Path, now: datetime | None = None) -> Halt | None:
    """The halt in force from the file, or None when there is no file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a file we cannot even stat: it exists, so it halts
        return Halt("file", f"(halt file unreadable: {exc.strerror})", None, None, str(path))
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        text = f"reason: (halt file unreadable: {exc.strerror})"
    fields: dict[str, str] = {}
    loose: list[str] = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("reason", "author", "set_at"):
            fields[key.strip()] = value.strip()
        elif line.strip():
            loose.append(line.strip())
    reason = fields.get("reason") or (" ".join(loose) if loose else None)
    since = datetime.fromtimestamp(stat.st_mtime, UTC)
    return Halt("file", reason or None, since, fields.get("author") or None, str(path))


def write_halt_file(
    path: Path, reason: str, author: str | None = None, now: datetime | None = None
) -> Halt:
    """Set the switch with a reason and an author (``invoke halt --reason``)."""
    now = now or datetime.now(UTC)
    who = author or f"{getpass.getuser()}@{socket.gethostname()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    one_line = " ".join(reason.split())
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(f"reason: {one_line}\nauthor: {who}\nset_at: {iso(now)}\n", encoding="utf-8")
    os.replace(tmp, path)
    halt = read_halt_file(path, now)
    assert halt is not None
    return halt


def remove_halt_file(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
