"""Capacity-dark: "the work failed" versus "this worker cannot accept work" (D8, pre-flight check 4).

When a run dies on a provider limit the runner writes ``<state_dir>/capacity.json`` carrying the
provider's own stated reset, and the dispatcher reads it before launching onto the worker. This
module is the parsing (pure) plus the few lines that read and write that one file.

The three properties D8 asks for, and where they live here:

1. *Self-healing*: ``AgentReport.clean`` — only a zero exit **and** no error the CLI reported clears
   the file, so a run that ends on a trailing limit notice does not delete a marker still true.
2. *Never fabricate a reset*: :func:`resolve_clock` returns None unless the text states a time in a
   zone we can resolve; a bare clock time is resolved against today in that zone and rolled forward a
   day if that instant has already passed (a reset stamped in the past reads as recovered).
3. *Two kinds of dark*: :class:`fleet.core.model.CapacitySource` ``rate_limit`` (a clock clears it) and
   ``revoked`` (nothing but a human clears it); :func:`describe` gives each its own remedy.

Which text counts as a limit is the agent-kind adapter's decision (``fleet/agentkinds``): only the
CLI's own error fields and exit status, never the model's free text. This module holds the limit
phrases (:data:`_LIMIT`, matched by the adapter against a whole line or a whole result) and the
reset parsing they share.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.core.canary import canary_due
from fleet.core.model import Capacity, CapacitySource, iso, parse_iso, utc
from fleet.runner.statefile import read_state_file

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

CAPACITY_FILE = "capacity.json"

_LINE_START = r"^[^\w\n]{0,8}(?:(?:api\s+)?error:\s*)?"
_LIMIT = re.compile(
    _LINE_START + r"(?P<phrase>you(?:'|’|\s+ha)ve\s+hit\s+your\s+(?:[\w-]+\s+)?limit"
    r"|\d+-hour\s+limit\s+reached"
    r"|(?:claude\s+(?:ai\s+)?)?usage\s+limit\s+reached"
    r"|(?:session|daily|weekly|opus|sonnet)\s+limit\s+reached)"
    r"(?P<rest>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)
# "Claude AI usage limit reached|1767225600": the reset as epoch seconds, taken as is.
_EPOCH = re.compile(r"^\s*\|\s*(?P<epoch>\d{9,11})\b")
# "resets 1pm (Europe/Lisbon)", "resets 5:10pm (Europe/Paris)", "resets Oct 9, 5am (Europe/Berlin)".
_RESETS = re.compile(
    r"\bresets?\s+(?:at\s+)?(?P<clock>(?:[A-Za-z]{3,9}\.?\s+\d{1,2},?\s+(?:at\s+)?)?"
    r"\d{1,2}(?::\d{2})?\s*(?:[ap]\.?m\.?)?)\s*\((?P<tz>[^)\n]{1,64})\)",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"^(?:(?P<mon>[A-Za-z]{3,9})\.?\s+(?P<day>\d{1,2}),?\s+(?:at\s+)?)?"
    r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?:(?P<ampm>[ap])\.?m\.?)?$",
    re.IGNORECASE,
)
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}


@dataclass(frozen=True)
class LimitSignal:
    source: CapacitySource
    reset_at: datetime | None  # None = the provider stated none; never fabricated (D8 property 2)
    evidence: str  # the line that matched, trimmed


def _zone(tz: str) -> ZoneInfo | None:
    # zoneinfo (and the sysconfig it reads) only for a limit text that names a zone: every
    # command reads capacity files through this module, few of them ever name one.
    from zoneinfo import ZoneInfo

    try:
        return ZoneInfo(tz.strip())
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def resolve_clock(text: str, tz: str, now: datetime) -> datetime | None:
    """The next instant (UTC) at which the clock ``text`` ("1pm", "5:10pm", "13:00", "Oct 9, 5am")
    reads in zone ``tz``, as seen from ``now``; None when either cannot be resolved (D8 property 2).

    A bare time means today in that zone, or tomorrow if today's instant has already passed; a
    month and day mean that date this year, or next year if it has already passed.
    """
    zone, m = _zone(tz), _CLOCK.match(text.strip())
    if zone is None or m is None:
        return None
    hour, minute = int(m["h"]), int(m["m"] or 0)
    if m["ampm"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m["ampm"].lower() == "p" else 0)
    if hour > 23 or minute > 59:
        return None
    local_now = utc(now).astimezone(zone)
    at = time(hour, minute)
    try:
        if m["mon"]:
            month = _MONTHS.get(m["mon"][:3].lower())
            if month is None:
                return None
            candidate = datetime.combine(date(local_now.year, month, int(m["day"])), at, zone)
            if candidate < local_now:
                candidate = candidate.replace(year=local_now.year + 1)
        else:
            candidate = datetime.combine(local_now.date(), at, zone)
            if candidate < local_now:
                candidate = datetime.combine(local_now.date() + timedelta(days=1), at, zone)
    except ValueError:  # Feb 30, or Feb 29 rolled into a non-leap year
        return None
    return candidate.astimezone(UTC)


def _reset_from(rest: str, now: datetime) -> datetime | None:
    epoch = _EPOCH.match(rest)
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch["epoch"]), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    resets = _RESETS.search(rest)
    return resolve_clock(resets["clock"], resets["tz"], now) if resets else None


def to_capacity(signal: LimitSignal, *, now: datetime, issue: int | None) -> Capacity:
    """The state-file value for a signal seen by the run of ``issue`` at ``now``."""
    return Capacity(signal.source, signal.reset_at, signal.evidence, utc(now), issue)


# -- the state file ----------------------------------------------------------------------------


def capacity_path(state_dir: Path) -> Path:
    return Path(state_dir) / CAPACITY_FILE


def write_capacity(path: Path, cap: Capacity) -> None:
    """Write the file atomically (temp file in the same directory, fsync, rename): a dispatcher
    reading concurrently sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "source": cap.source.value,
        "reset_at": iso(cap.reset_at),
        "evidence": cap.evidence,
        "written_at": iso(cap.written_at),
        "issue": cap.issue,
        "canary_at": iso(cap.canary_at),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _capacity_from(data: object) -> Capacity:
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    raw_source = data.get("source")
    if not isinstance(raw_source, str):  # as CapacitySource(raw_source) would refuse it
        raise ValueError(f"{raw_source!r} is not a valid {CapacitySource.__qualname__}")
    source = CapacitySource(raw_source)  # ValueError on an unknown source
    evidence, issue = data.get("evidence", ""), data.get("issue")
    if not isinstance(evidence, str):
        raise ValueError("evidence is not a string")
    if issue is not None and (isinstance(issue, bool) or not isinstance(issue, int)):
        raise ValueError("issue is not an integer")
    stamps = [data.get("reset_at"), data.get("written_at"), data.get("canary_at")]
    if any(s is not None and not isinstance(s, str) for s in stamps):
        raise ValueError("reset_at/written_at/canary_at is not an ISO timestamp")
    reset, written, canary = (parse_iso(s) for s in stamps)
    return Capacity(source, reset, evidence, written, issue, canary)


def read_capacity(path: Path) -> tuple[Capacity | None, str | None]:
    """(capacity, None) when dark; (None, None) when no file; (None, warning) when the file exists
    but cannot be read — the guard fails OPEN on its own outage and says why (D5)."""
    text, unreadable = read_state_file(path)
    if unreadable is not None:
        return None, f"capacity file {path} unreadable, treated as not dark: {unreadable}"
    if text is None:
        return None, None
    try:
        return _capacity_from(json.loads(text)), None
    except (ValueError, TypeError) as err:
        return None, f"capacity file {path} garbled, treated as not dark: {err}"


def clear_capacity(path: Path) -> bool:
    """Delete the file after a clean run; True when there was one to delete."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        return False
    return True


def _span(delta: timedelta) -> str:
    minutes = int(abs(delta).total_seconds() // 60)
    if minutes < 1:
        return "<1m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


def _stamp(ts: datetime) -> str:
    return utc(ts).strftime("%Y-%m-%d %H:%M UTC")


def describe(cap: Capacity, now: datetime, *, path: Path | None = None) -> str:
    """The refusal message: one remedy per source, because the remedies are opposite (D8 prop. 3)."""
    where = str(path) if path is not None else "the capacity file"
    if cap.source is CapacitySource.REVOKED:
        return (
            "dark: entitlement revoked — a clock will not clear this; "
            f"renew the credential and delete {where} (evidence: {cap.evidence})"
        )
    if cap.reset_at is None:
        due = canary_due(cap)
        probe = (
            f"one canary run allowed from {_stamp(due)}, when no unit is live there"
            if due is not None
            else f"no written_at to time a canary from: delete {where} by hand"
        )
        return f"dark: rate limit, reset unknown; {probe} (evidence: {cap.evidence})"
    left = utc(cap.reset_at) - utc(now)
    if left.total_seconds() <= 0:
        return f"dark: rate limit, stated reset {_stamp(cap.reset_at)} passed {_span(left)} ago"
    return f"dark: rate limit until {_stamp(cap.reset_at)} (in {_span(left)})"


def parse_capacity(text: str, *, where: str) -> tuple[Capacity | None, str | None]:
    """The capacity file's text as read from a worker by the dispatcher's probe (check 4).

    Same contract as :func:`read_capacity`: garbage fails OPEN (not dark) with a warning (D5).
    """
    try:
        return _capacity_from(json.loads(text)), None
    except (ValueError, TypeError) as err:
        return None, f"capacity file {where} garbled, treated as not dark: {err}"
