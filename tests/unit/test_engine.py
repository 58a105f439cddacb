"""The engine's three failure classes acting (seed 000), through the production ``drain``: retry
on a bounded ladder, refuse once, cannot-classify handed to a human."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from fleet.roles.engine import (
    RETRY_BACKOFFS_S,
    Escalation,
    Failure,
    FileClaims,
    Result,
    Tier,
    drain,
    each,
)
from fleet.trace import Trace, read_trace

REPO = Path(__file__).resolve().parents[2]
LADDER = (0.05, 0.15)  # short rungs: the order and the gaps are what is tested, not the seconds


class Scripted:
    """A Loop whose dispatch answers from a script per item; every call is timed."""

    def __init__(self, script: dict[str, list[Result]]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.calls: dict[str, list[float]] = {k: [] for k in script}
        self.landed: list[tuple[str, bool]] = []
        self.rounds: list[list[str]] = []  # the items of each dispatch call
        self._lock = threading.Lock()

    def name(self) -> str:
        return "scripted"

    def select_queue(self) -> Sequence[str]:
        return list(self.script)

    def tier_policy(self, item: str) -> Tier:
        return Tier.DISPATCH

    def dispatch(self, items: Sequence[str]) -> list[Result]:
        self.rounds.append(list(items))
        return each(items, self._one)

    def _one(self, item: str) -> Result:
        with self._lock:
            self.calls[item].append(time.monotonic())
            answers = self.script[item]
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def land(self, item: str, result: Result) -> None:
        self.landed.append((item, result.ok))

    def on_idle(self) -> bool:
        return False


def run(tmp_path: Path, script: dict[str, list[Result]], escalate=None, pool=4):  # type: ignore[no-untyped-def]
    loop = Scripted(script)
    trace = Trace(tmp_path / "trace.jsonl")
    report = drain(
        loop, FileClaims(tmp_path / "claims"), trace, pool=pool, backoffs=LADDER, escalate=escalate
    )
    return loop, report, read_trace(tmp_path / "trace.jsonl")


RETRY = Result(False, "lock held", Failure.RETRY)
REFUSE = Result(False, "guard said no", Failure.REFUSE)
ODD = Result(False, "exit 43: supervisor failed", Failure.UNCLASSIFIED)
OK = Result(True, "launched")


def test_a_retry_is_dispatched_again_after_each_rung_then_lands(tmp_path: Path) -> None:
    told: list[Escalation] = []
    loop, report, events = run(tmp_path, {"7": [RETRY, RETRY, OK]}, told.extend)
    calls = loop.calls["7"]
    assert len(calls) == 3 and loop.landed == [("7", False), ("7", False), ("7", True)]
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= LADDER[0] and gaps[1] >= LADDER[1], gaps
    retries = [e for e in events if e["event"] == "RETRY"]
    assert [(e["item"], e["after_s"], e["rung"]) for e in retries] == [
        ("7", LADDER[0], 1),
        ("7", LADDER[1], 2),
    ]
    assert (report.retried, report.ok, report.unclassified) == (2, 1, [])
    assert not told
    assert not list((tmp_path / "claims" / "scripted").glob("*.claim"))  # every claim released


def test_the_retry_ladder_is_bounded(tmp_path: Path) -> None:
    told: list[Escalation] = []
    loop, report, _ = run(tmp_path, {"7": [RETRY]}, told.extend)
    assert len(loop.calls["7"]) == len(LADDER) + 1
    assert report.retried == len(LADDER) and report.failed == len(LADDER) + 1
    assert not told  # a retry-class failure past its ladder waits for the next drain


def test_a_refusal_is_landed_once_never_retried_and_nobody_is_told(tmp_path: Path) -> None:
    told: list[Escalation] = []
    loop, report, events = run(tmp_path, {"8": [REFUSE, OK]}, told.extend)
    assert len(loop.calls["8"]) == 1 and loop.landed == [("8", False)]
    assert report.refused == 1 and report.retried == 0
    assert not told and not [e for e in events if e["event"] in ("RETRY", "ESCALATE")]


def test_cannot_classify_goes_to_a_human_once_and_is_not_retried(tmp_path: Path) -> None:
    told: list[Escalation] = []
    crash = RuntimeError("boom")
    loop, report, events = run(tmp_path, {"9": [ODD, OK], "10": [crash], "11": [OK]}, told.extend)
    assert len(loop.calls["9"]) == 1 and len(loop.calls["10"]) == 1
    assert sorted((e.loop, e.item) for e in told) == [("scripted", "10"), ("scripted", "9")]
    assert any("RuntimeError: boom" in e.detail for e in told)
    assert any("exit 43" in e.detail for e in told)
    routes = [e for e in events if e["event"] == "ROUTE" and e.get("why") == "cannot-classify"]
    assert sorted(e["item"] for e in routes) == ["10", "9"]
    assert report.ok == 1  # the drain went on past both


def test_a_broken_human_channel_does_not_stop_the_drain(tmp_path: Path) -> None:
    def broken(_: Sequence[Escalation]) -> None:
        raise OSError("board down")

    _, report, events = run(tmp_path, {"9": [ODD], "11": [OK]}, broken)
    assert report.ok == 1 and len(report.unclassified) == 1
    esc = [e for e in events if e["event"] == "ESCALATE"]
    assert len(esc) == 1 and "board down" in esc[0]["error"]


def test_the_ladder_fits_inside_the_sweeper_units_start_timeout() -> None:
    """The ladder is spent inside one tick; the sweeper unit kills a tick at TimeoutStartSec."""
    unit = (REPO / "deploy/systemd/fleet-sweeper.service").read_text(encoding="utf-8")
    m = re.search(r"^TimeoutStartSec=(\d+)$", unit, re.MULTILINE)
    assert m is not None
    assert sum(RETRY_BACKOFFS_S) < int(m.group(1)) / 2
    assert list(RETRY_BACKOFFS_S) == sorted(RETRY_BACKOFFS_S) and RETRY_BACKOFFS_S[0] > 0


@pytest.mark.parametrize("failure", [Failure.REFUSE, Failure.UNCLASSIFIED])
def test_only_the_retry_class_is_retried(tmp_path: Path, failure: Failure) -> None:
    loop, _, _ = run(tmp_path, {"5": [Result(False, "x", failure), OK]})
    assert len(loop.calls["5"]) == 1


def test_a_round_hands_every_claimed_item_to_one_dispatch_call_up_to_the_pool(
    tmp_path: Path,
) -> None:
    """The sweeper's plan reaches the dispatch path as batches: one call per ``pool`` items, each
    item claimed before its call and landed after it, retries in a later call of their own."""
    script = {str(n): [OK] for n in range(5)} | {"9": [RETRY, OK]}
    FileClaims(tmp_path / "claims").claim("scripted", "3")  # another dispatcher holds #3
    loop, report, events = run(tmp_path, script, pool=2)
    assert loop.rounds == [["0", "1"], ["2", "4"], ["9"], ["9"]]
    assert report.skipped_claimed == 1 and report.ok == 5 and report.retried == 1
    kinds = [(e["event"], e["item"]) for e in events if e.get("item") in ("0", "1")]
    claims = [i for i, k in enumerate(kinds) if k[0] == "CLAIM"]
    lands = [i for i, k in enumerate(kinds) if k[0] == "LAND"]
    assert max(claims) < min(lands)  # both claimed before the one call that carries them


class Raises(Scripted):
    def dispatch(self, items: Sequence[str]) -> list[Result]:
        raise RuntimeError("the batch broke")


class Short(Scripted):
    def dispatch(self, items: Sequence[str]) -> list[Result]:
        return [OK]


@pytest.mark.parametrize(("cls", "says"), [(Raises, "the batch broke"), (Short, "1 results")])
def test_a_dispatch_call_that_fails_lands_each_of_its_items_as_failed(
    tmp_path: Path, cls: type[Scripted], says: str
) -> None:
    loop = cls({"1": [OK], "2": [OK]})
    report = drain(loop, FileClaims(tmp_path / "claims"), Trace(tmp_path / "t.jsonl"), pool=4)
    assert loop.landed == [("1", False), ("2", False)]
    assert len(report.unclassified) == 2 and all(says in e.detail for e in report.unclassified)
    assert not list((tmp_path / "claims" / "scripted").glob("*.claim"))
