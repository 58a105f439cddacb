"""D8 on the four-worker harness, where runs really overlap: two runs on ONE master end out of order.

Run A starts first and runs long (``demo:wait-go``: it finishes cleanly when its issue is labelled
``demo:go``); run B starts on the same master while A is going, hits the provider limit and darkens
the worker. Then A finishes, cleanly. A started before the darkness, so it proves nothing about the
account now: the capacity file stays, and the next dispatch onto the worker is refused (check 4).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet.core.exits import Exit
from fleet.core.markers import Kind
from fleet.core.model import CapacitySource
from fleet.dispatch import dispatch
from fleet.observe import snapshot
from fleet.testing.harness import HarnessInfo
from tests.docker.faults_support import (
    FaultFleet,
    Leftovers,
    fault_fleet,
    file_issue,
    kinds,
    leftovers,
    read_remote,
    start_fields,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture
def ff(harness_info: HarnessInfo, harness_deploy: Callable[[str], Path]) -> FaultFleet:
    return fault_fleet(harness_info, harness_deploy)


@pytest.fixture
def left(ff: FaultFleet) -> Iterator[Leftovers]:
    yield from leftovers(ff)


def test_two_runs_on_one_master_ending_out_of_order_leave_the_worker_dark(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w2"
    cap_file = f"{ff.state_dir(w)}/capacity.json"
    ff.must(w, f"rm -f {cap_file}")
    try:
        long_a = file_issue(ff, left, "Race: a long clean run (A)", labels=["demo:wait-go"], lane=w)
        with ff.context() as ctx:
            ra = dispatch(ctx, long_a, worker=w)
        assert ra.launched, ra.line()
        left.units.append((w, long_a))
        ff.wait_marker(long_a, Kind.START)  # A has started: its step 2 is behind it

        limited_b = file_issue(ff, left, "Race: meets the limit (B)", labels=["demo:rate-limit"])
        with ff.context() as ctx:
            rb = dispatch(ctx, limited_b, worker=w)
        assert rb.launched, rb.line()
        left.units.append((w, limited_b))
        ff.wait_last(limited_b, Kind.CAPACITY)
        dark = json.loads(read_remote(ff, w, cap_file))
        assert dark["source"] == CapacitySource.RATE_LIMIT.value and dark["issue"] == limited_b
        assert (
            start_fields(ff.issue(long_a))["master"] == start_fields(ff.issue(limited_b))["master"]
        )
        assert kinds(ff.issue(long_a))[-1] is Kind.START  # A is still going: the runs overlap

        ff.board.add_labels(long_a, ["demo:go"])  # A ends now, cleanly, after B darkened w2
        ff.wait_last(long_a, Kind.SUCCESS)

        assert json.loads(read_remote(ff, w, cap_file)) == dark, "A healed a worker B darkened"
        with ff.context() as ctx:
            assert w in {v.name for v in snapshot(ctx).workers if v.dark}
            refused = dispatch(ctx, file_issue(ff, left, "Not onto the dark worker"), worker=w)
        assert (refused.check, refused.code) == (4, Exit.DARK_RATE_LIMIT), refused.line()
    finally:
        ff.sh(w, f"rm -f {cap_file}")  # a failed test must not leave w2 dark for the next one
