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
The second kill switch — an open issue with the halt title — lives on the board (fleet.select).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleet.halt import read_halt_file, remove_halt_file, write_halt_file
from fleet.inventory import Inventory
from fleet.model import Halt

PAUSE = "PAUSE"
DRAIN = "DRAIN"


@dataclass(frozen=True)
class Switch:
    """One file switch that is on: who set it, why, and since when (its mtime)."""

    name: str  # "halt file" | "PAUSE" | "DRAIN"
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


def operator(author: str | None = None) -> str:
    """Who set a switch or cancelled a run: ``--author``, else $USER, else the login name."""
    return author or os.environ.get("USER") or getpass.getuser()


def halt_path(inv: Inventory) -> Path:
    return Path(inv.halt.file)


def flag_path(inv: Inventory, name: str) -> Path:
    if name not in (PAUSE, DRAIN):
        raise ValueError(f"no switch named {name!r} (PAUSE or DRAIN)")
    return Path(inv.state_dir) / name


def _switch(name: str, halt: Halt | None) -> Switch | None:
    if halt is None:
        return None
    return Switch(name, halt.where, halt.reason, halt.author, halt.since)


def read_switch(name: str, path: Path) -> Switch | None:
    """The switch at ``path`` if it is on (the file exists), whatever it holds."""
    return _switch(name, read_halt_file(path))


def write_switch(
    name: str, path: Path, reason: str, author: str | None = None, now: datetime | None = None
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
        halt_file=read_switch("halt file", halt_path(inv)),
        pause=read_switch(PAUSE, flag_path(inv, PAUSE)),
        drain=read_switch(DRAIN, flag_path(inv, DRAIN)),
    )
