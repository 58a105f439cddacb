"""The close rule (seed 001 §13): the fleet is idle only when no unit is live and nothing is parked
or in flight. Pure: one snapshot in, one verdict out, no I/O and no clock.

The verdict names what is still out, because "not idle" alone sends an operator hunting:

* **live** — a unit ``task-N`` that the supervisor reports live, on any worker under any master;
* **in flight** — an open issue whose latest marker is a start: a run began and has not posted
  its terminal (a live run, or an orphan the reaper will reset — either way it is not finished);
* **parked** — an open issue whose last word is a retry park (D7): a run that failed transiently
  and is waiting for its due time; it is work in progress, not a hold (a ``park`` latch a human
  set is a hold and does not count);
* **could not check** — a worker that did not answer the probe, or a board that could not be read.
  Silence is never absence (D20): while anything is unchecked the fleet is not called idle.

Eligible work that has not started does not count: under DRAIN nothing new starts, and "idle" is
the moment the last started run has finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleet.core.markers import TERMINAL, Kind, history
from fleet.core.model import Snapshot, unit_name

_RUN_WORDS = TERMINAL | {Kind.START}  # the markers that begin or end a run (D12)


def place(worker: str, master: str) -> str:
    """``worker/master``, or just ``worker`` when the inventory names no master (a local worker)."""
    return f"{worker}/{master}" if master else worker


@dataclass(frozen=True)
class LiveUnit:
    issue: int
    worker: str
    master: str
    state: str

    def text(self) -> str:
        return f"{unit_name(self.issue)} on {place(self.worker, self.master)} ({self.state})"


@dataclass(frozen=True)
class InFlight:
    issue: int
    started_at: datetime  # the start marker's board timestamp
    live: bool  # a live unit for the issue was seen (False: an orphan, or on an unchecked worker)

    def text(self) -> str:
        how = "" if self.live else ", no live unit seen"
        return (
            f"#{self.issue} (start marker at {self.started_at.isoformat(timespec='seconds')}{how})"
        )


@dataclass(frozen=True)
class Parked:
    issue: int
    due: str | None  # the park's due field as written (an unreadable one is still a park)

    def text(self) -> str:
        return f"#{self.issue} until {self.due or 'an unreadable due time'}"


@dataclass(frozen=True)
class IdleVerdict:
    live: tuple[LiveUnit, ...] = ()
    in_flight: tuple[InFlight, ...] = ()
    parked: tuple[Parked, ...] = ()
    unchecked: tuple[str, ...] = ()  # "worker w2: unreachable: ..." or "board: ..."

    @property
    def idle(self) -> bool:
        return not (self.live or self.in_flight or self.parked or self.unchecked)

    def line(self) -> str:
        """One line for a human: why the fleet is (not) idle."""
        if self.idle:
            return "idle: no unit is live, nothing is parked or in flight"
        parts = []
        if self.live:
            parts.append("live " + ", ".join(u.text() for u in self.live))
        if self.in_flight:
            parts.append("in flight " + ", ".join(f.text() for f in self.in_flight))
        if self.parked:
            parts.append("parked " + ", ".join(p.text() for p in self.parked))
        if self.unchecked:
            parts.append("could not check " + "; ".join(self.unchecked))
        return "not idle: " + "; ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "idle": self.idle,
            "live": [u.__dict__ for u in self.live],
            "in_flight": [
                {"issue": f.issue, "started_at": f.started_at.isoformat(), "live": f.live}
                for f in self.in_flight
            ],
            "parked": [p.__dict__ for p in self.parked],
            "unchecked": list(self.unchecked),
        }


def idle(snap: Snapshot) -> IdleVerdict:
    """The close rule over one snapshot."""
    live = tuple(
        LiveUnit(u.issue, w.name, u.master, u.state)
        for w in snap.workers
        for u in w.units
        if u.live
    )
    live_issues = {u.issue for u in live}
    in_flight: list[InFlight] = []
    parked: list[Parked] = []
    for issue in sorted(snap.issues, key=lambda i: i.number):
        if not issue.is_open:
            continue
        h = history(issue, snap.policy)
        # The latest start-or-terminal *marker*, not the latest word: a reopen, a release or a
        # human's hold after a start does not end the run that start began; only a terminal does.
        last = next((m for m in reversed(h.markers) if m.kind in _RUN_WORDS), None)
        if last is not None and last.kind is Kind.START:
            in_flight.append(InFlight(issue.number, last.at, issue.number in live_issues))
        if h.last_marker is not None and h.last_marker.kind is Kind.PARKED:
            parked.append(Parked(issue.number, h.last_marker.get("due")))
    unchecked = tuple(
        f"worker {w.name}: {w.reach.value}" + (f": {w.detail}" if w.detail else "")
        for w in snap.workers
        if not w.reachable
    )
    if snap.board_error is not None:
        unchecked = (f"board: {snap.board_error}", *unchecked)
    return IdleVerdict(live, tuple(in_flight), tuple(parked), unchecked)
