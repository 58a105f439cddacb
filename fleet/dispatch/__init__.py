"""Dispatch: the one path to a launch (D15), in three parts.

* ``checks`` — seed 003's pre-flight checks, each answering with a value or a ``Refusal``;
* ``claim`` — checks 6 and 10 under the fleet-wide lock, and what a unit is started with;
* ``path`` — the order they run in: ``dispatch_batch`` for a sweep's plan, ``dispatch`` for one
  request by hand (``invoke dispatch``), the same function with a batch of one.
"""

from fleet.dispatch.checks import SYNC_TIMEOUT_S
from fleet.dispatch.claim import (
    fleet_lock,
    inventory_arg,
    runner_argv,
)
from fleet.dispatch.path import Request, dispatch, dispatch_batch
from fleet.dispatch.result import DispatchResult, Outcome, Refusal, new_run_id

__all__ = [
    "SYNC_TIMEOUT_S",
    "DispatchResult",
    "Outcome",
    "Refusal",
    "Request",
    "dispatch",
    "dispatch_batch",
    "fleet_lock",
    "inventory_arg",
    "new_run_id",
    "runner_argv",
]
