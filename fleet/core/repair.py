"""Oldest-wins repair (D4), pure: when live units for one issue coexist, which one to keep.

Two units for one issue get past every layer only when something bypassed the fleet lock — a hand
path, or two masters on one box, whose user supervisors are two name registries (D4's table). The
repair is deterministic because picking by eye was wrong both times it was tried, and killing by
hand landed both kills on the surviving run.

**The order.** Oldest wins, because it has done the most work:

* on one host, by the unit's **monotonic** start in microseconds (``Unit.start_us``): one kernel,
  one clock, no steps, and ties are unreachable in practice;
* across hosts monotonic clocks do not compare (each counts from its own boot), so each host's
  oldest is compared by its **wall-clock** start (``Unit.started_at``);
* a tie (unreachable in practice) is broken by ``(worker, master)`` name, and the decision says so.

A start time that is unknown (``start_us`` 0: the supervisor has not written the record yet;
``started_at`` absent) where it is needed leaves the issue **undecided**: nothing is stopped,
because stopping on a guess is how the surviving run gets killed (D4). The next repair decides.

"Host" is a key the caller supplies per worker (``hosts``): two masters on one box share it. Without
it every worker is its own host, which only ever falls back to the wall clock — never wrong, only
coarser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fleet.core.markers import Kind, render
from fleet.core.model import Unit, iso

ORDER = (
    "oldest wins (D4): on one host by monotonic start (µs); across hosts, whose monotonic clocks "
    "do not compare, by wall-clock start; ties (unreachable in practice) by (worker, master) name"
)


@dataclass(frozen=True)
class RepairDecision:
    """One issue with two or more live units: the one to keep and the ones to stop, or undecided
    (``keep`` is None, ``stop`` is empty) when a start time the order needs is unknown."""

    issue: int
    keep: Unit | None
    stop: tuple[Unit, ...]
    why: str

    @property
    def decided(self) -> bool:
        return self.keep is not None


def who(u: Unit) -> str:
    """``worker/master``; a local worker's master may be unnamed (the invoking user)."""
    return f"{u.worker}/{u.master}" if u.master else u.worker


def _host_key(u: Unit) -> tuple[int, str, str]:
    return (u.start_us, u.worker, u.master)


def _wall_key(u: Unit) -> tuple[datetime, str, str]:
    assert u.started_at is not None
    return (u.started_at, u.worker, u.master)


def _decide(issue: int, units: list[Unit], hosts: Mapping[str, str]) -> RepairDecision:
    by_host: dict[str, list[Unit]] = {}
    for u in units:
        by_host.setdefault(hosts.get(u.worker, u.worker), []).append(u)
    champions: list[tuple[str, Unit]] = []
    notes: list[str] = []
    for host, group in sorted(by_host.items()):
        if len(group) > 1:
            unknown = [who(u) for u in group if u.start_us <= 0]
            if unknown:
                why = f"monotonic start unknown for {', '.join(unknown)} on host {host}"
                return RepairDecision(issue, None, (), f"undecided: {why}; stopping nothing")
            group.sort(key=_host_key)
            first, second = group[0], group[1]
            tie = " (tie: broken by name)" if first.start_us == second.start_us else ""
            notes.append(
                f"on host {host} {who(first)} started at {first.start_us} µs monotonic, "
                f"before {', '.join(f'{who(u)} {u.start_us} µs' for u in group[1:])}{tie}"
            )
        champions.append((host, group[0]))
    if len(champions) > 1:
        unknown = [who(u) for _, u in champions if u.started_at is None]
        if unknown:
            why = f"wall-clock start unknown for {', '.join(unknown)} (hosts differ)"
            return RepairDecision(issue, None, (), f"undecided: {why}; stopping nothing")
        champions.sort(key=lambda hu: _wall_key(hu[1]))
        (_, first), (_, second) = champions[0], champions[1]
        tie = " (tie: broken by name)" if first.started_at == second.started_at else ""
        others = ", ".join(f"{who(u)} {iso(u.started_at)}" for _, u in champions[1:])
        notes.append(
            f"across hosts {who(first)} started at {iso(first.started_at)} wall clock, before "
            f"{others}{tie}"
        )
    keep = champions[0][1]
    stop = tuple(sorted((u for u in units if u is not keep), key=lambda u: (u.worker, u.master)))
    return RepairDecision(issue, keep, stop, f"keep {who(keep)}: {'; '.join(notes)}")


def repair_plan(
    units: Iterable[Unit], hosts: Mapping[str, str] | None = None
) -> tuple[RepairDecision, ...]:
    """One decision per issue that has two or more live units, in issue order. Units that are not
    live (finished, failed, lingering) are not duplicates and are ignored."""
    by_issue: dict[int, dict[tuple[str, str], Unit]] = {}
    for u in units:
        # One master's supervisor holds a name once (D4): the same (worker, master) twice is one
        # unit seen twice, never a duplicate to stop — stopping it would stop the one kept.
        if u.live:
            by_issue.setdefault(u.issue, {}).setdefault((u.worker, u.master), u)
    return tuple(
        _decide(issue, [group[k] for k in sorted(group)], hosts or {})  # input order never matters
        for issue, group in sorted(by_issue.items())
        if len(group) > 1
    )


def superseded_marker(d: RepairDecision, stopped: Unit) -> str:
    """The ``superseded`` marker for one stopped duplicate: not a failure, names the kept unit."""
    assert d.keep is not None
    fields = {"kept": who(d.keep), "stopped": who(stopped)}
    note = (
        f"Duplicate unit {stopped.name} on {who(stopped)} stopped by oldest-wins repair; "
        f"{d.why}. This is not a failure: the run on {who(d.keep)} goes on."
    )
    return render(Kind.SUPERSEDED, fields, note)


__all__ = ["ORDER", "RepairDecision", "repair_plan", "superseded_marker", "who"]
