"""The operator's switches as files: the halt file (the first kill switch), PAUSE and DRAIN.

Three files, three remedies, so three names (D20):

* **halt file** (inventory ``halt.file``): nothing is dispatched at all (seed 003's first switch);
* **PAUSE** (``state_dir/PAUSE``): a hold in which only cancels are decided (seed 001 §10/§11);
  runs already live go on, nothing new starts, the keeping-honest roles hold too;
* **DRAIN** (``state_dir/DRAIN``): the wind-down — nothing new starts, in-flight runs finish, and
  the operator is told when the fleet is idle (seed 001 §13's close rule).

All three share the halt file's format (``reason:``, ``author:``, ``set_at:`` lines; its age is its
mtime) and its reading rule: a file that exists is on, even when it is empty, and a switch that
carries no reason says so, because an unexplained stop is the one state nobody can safely act on.
The second kill switch — an open issue with the halt title — lives on the board (fleet.core.select).
An empty or reasonless file still switches — a switch must never depend on the setter remembering —
but every line that shows it says no reason was recorded.
"""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from fleet.core.model import Halt, HaltSource, iso
from fleet.inventory import Inventory


class SwitchName(StrEnum):
    """The three file switches, by the name every line shows (PAUSE and DRAIN are also the names
    of their files in the state dir; the halt file's path is the inventory's ``halt.file``)."""

    HALT_FILE = "halt file"
    PAUSE = "PAUSE"
    DRAIN = "DRAIN"


@dataclass(frozen=True)
class Switch:
    """One file switch that is on: who set it, why, and since when (its mtime)."""

    name: SwitchName
    path: str
    reason: str | None  # None = the setter recorded none; the switch is on all the same
    author: str | None
    since: datetime | None


@dataclass(frozen=True)
class Switches:
    """Every file switch as one read saw it (None = off). The halt issue is read from the board."""

    halt_file: Switch | None
    pause: Switch | None
    drain: Switch | None


# -- the file format, shared by all three ---------------------------------------------------------
def read_halt_file(path: Path, now: datetime | None = None) -> Halt | None:
    """The halt in force from the file, or None when there is no file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a file we cannot even stat: it exists, so it halts
        return Halt(
            HaltSource.FILE, f"(halt file unreadable: {exc.strerror})", None, None, str(path)
        )
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
    return Halt(HaltSource.FILE, reason or None, since, fields.get("author") or None, str(path))


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


# -- the switches ----------------------------------------------------------------------------------
def operator(author: str | None = None) -> str:
    """Who set a switch or cancelled a run: ``--author``, else $USER, else the login name."""
    return author or os.environ.get("USER") or getpass.getuser()


def halt_path(inv: Inventory) -> Path:
    return Path(inv.halt.file)


def flag_path(inv: Inventory, name: SwitchName) -> Path:
    if name not in (SwitchName.PAUSE, SwitchName.DRAIN):
        raise ValueError(f"no switch named {str(name)!r} (PAUSE or DRAIN)")
    return Path(inv.state_dir) / name


def _switch(name: SwitchName, halt: Halt | None) -> Switch | None:
    if halt is None:
        return None
    return Switch(name, halt.where, halt.reason, halt.author, halt.since)


def read_switch(name: SwitchName, path: Path) -> Switch | None:
    """The switch at ``path`` if it is on (the file exists), whatever it holds."""
    return _switch(name, read_halt_file(path))


def write_switch(
    name: SwitchName,
    path: Path,
    reason: str,
    author: str | None = None,
    now: datetime | None = None,
) -> Switch:
    """Set a switch with its reason and author, atomically (a reader never sees half a file)."""
    written = _switch(name, write_halt_file(path, reason, operator(author), now))
    assert written is not None
    return written


def remove_switch(path: Path) -> bool:
    """Turn a switch off; True when it was on."""
    return remove_halt_file(path)


def role_hold(inv: Inventory) -> Switch | None:
    """The switch that turns the keeping-honest roles (reap, repair, announce) into dry runs: the
    halt file, else PAUSE. A pause is a hold in which only cancels are decided (seed 001 §10), and
    a halt stops every write the fleet makes on its own; DRAIN holds nothing here, because reaping
    and repairing are how in-flight work finishes."""
    s = read_switches(inv)
    return s.halt_file or s.pause


def hold_line(role: str, switch: Switch) -> str:
    reason = switch.reason or "no reason was recorded"
    return f"fleet: {role} held by the {switch.name} ({reason}): reporting only, writing nothing"


def read_switches(inv: Inventory) -> Switches:
    return Switches(
        halt_file=read_switch(SwitchName.HALT_FILE, halt_path(inv)),
        pause=read_switch(SwitchName.PAUSE, flag_path(inv, SwitchName.PAUSE)),
        drain=read_switch(SwitchName.DRAIN, flag_path(inv, SwitchName.DRAIN)),
    )
