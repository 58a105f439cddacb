"""Deaths before the start marker: the one run outcome the board cannot count (D12, D13).

A runner that exits before run step 4 — its runner clone would not sync (70), the inventory, its
worker entry or the board would not open (73), it crashed (74), or its token is not the board's
identity (76) — posts nothing, so the issue still
reads as eligible and every sweep launches it again without spending an attempt: an unbounded loop
on a box that is broken the same way each time. The unit's own process therefore records each such
death as one JSON line in ``<state_dir>/launch-deaths.jsonl`` on its worker; the dispatcher's probe
reads the file in its existing round trip (fleet.observe) and selection counts the deaths since the
issue's last word like attempts (fleet.core.select, state ``dead-on-launch``).

The file is the unit's recorded result, not a second queue (D1): it holds only what the board
cannot, the count restarts at every marker, release or reopen on the issue (by time), and the
runner that does post a start marker drops its issue's lines. Writes are appends of one short line
(atomic under O_APPEND) or a rewrite under a flock; every failure here is said on stderr and never
changes the runner's exit (D5).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from fleet.core.exits import PRESTART_CAUSES
from fleet.core.model import LaunchDeath, iso, parse_iso
from fleet.runner.flock import exclusive

DEATHS_FILE = "launch-deaths.jsonl"
# The exits that mean "this launch died before its start marker", and each one's cause: in
# fleet.core.exits beside the codes. 72 (the start marker could not be posted) is not one: the board
# itself is failing, which every sweep sees.
PRESTART_EXITS = frozenset(PRESTART_CAUSES)
# A line's "why" is the runner's one-line reason; a traceback's tail can be long, the file is read
# by every probe of the worker, so it is capped at what one status line shows.
_WHY_CHARS = 200
# The environment variable the dispatcher sets on every unit: the worker's state directory, so a
# runner that cannot even read its inventory (exit 73) still knows where to record its death.
STATE_DIR_ENV = "FLEET_STATE_DIR"
# The CI baseline the run starts on (green, red, unknown): the dispatch sets it, the start marker says it.
BASELINE_ENV = "FLEET_BASELINE"


def deaths_path(state_dir: str | Path) -> Path:
    return Path(os.path.expanduser(str(state_dir))) / DEATHS_FILE


def record_death(
    state_dir: str | Path, *, issue: int, run_id: str, code: int, why: str, now: datetime
) -> str | None:
    """Append one death; returns a warning when it could not be written (the run's exit stands)."""
    line = {
        "issue": issue,
        "run": run_id,
        "exit": int(code),
        "at": iso(now),
        "why": " ".join(why.split())[:_WHY_CHARS],
    }
    path = deaths_path(state_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    except OSError as exc:
        return f"could not record the death before the start marker in {path}: {exc}"
    return None


def forget_issue(state_dir: str | Path, issue: int) -> str | None:
    """A start marker was posted: this launch path works, so the issue's recorded deaths go.
    Returns a warning when the file could not be rewritten."""
    path = deaths_path(state_dir)
    try:
        with exclusive(path.with_name(path.name + ".lock")):
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            kept = [ln for ln in text.splitlines() if _issue_of(ln) != issue]
            if len(kept) == len(text.splitlines()):
                return None
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text("".join(ln + "\n" for ln in kept), encoding="utf-8")
            os.replace(tmp, path)
    except OSError as exc:
        return f"could not drop #{issue}'s launch deaths from {path}: {exc}"
    return None


def _issue_of(line: str) -> int | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    n = data.get("issue") if isinstance(data, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def parse_deaths(text: str, *, worker: str) -> tuple[tuple[LaunchDeath, ...], list[str]]:
    """The file's lines as values, and one warning per line that is not one (skipped: D5). Pure."""
    deaths: list[LaunchDeath] = []
    bad: list[str] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            issue, code = data["issue"], data["exit"]
            if isinstance(issue, bool) or not isinstance(issue, int) or not isinstance(code, int):
                raise ValueError("issue/exit is not an integer")
            at = parse_iso(data["at"])
            if at is None:
                raise ValueError("no time")
            deaths.append(
                LaunchDeath(issue, worker, str(data.get("run", "")), code, at, str(data.get("why")))
            )
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            bad.append(f"{worker}:{DEATHS_FILE}:{i}: not a launch-death record ({exc}); skipped")
    return tuple(deaths), bad
