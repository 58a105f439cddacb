"""Every exit code fleet uses, in one place (D20: two failures that look alike get two names).

``fleet.cmd.cli`` is the one place that turns these into process exits. Codes are grouped by the
pre-flight check that produces them (seed 003), so ``echo $?`` names the check.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0  # launched, or the command did what it was asked
    USAGE = 2  # a value the command refuses (a blank --reason, a bad --port); invoke itself exits 1 for an unknown flag
    INVENTORY = 3  # the inventory is malformed (file:line:col on stderr)
    # kill switches: checked before anything reaches the network
    HALTED_FILE = 10
    HALTED_ISSUE = 11
    PAUSED = 12  # an operator's pause: only cancels are decided
    DRAINING = 13  # drain: no new work is started
    # pre-flight checks 1-10
    ISSUE_MISSING = 21  # check 1
    ISSUE_CLOSED = 22  # check 2 (silent on the board)
    DO_NOT_DISPATCH = 23  # check 3 (the one refusal that comments, once)
    DARK_RATE_LIMIT = 24  # check 4, source rate_limit: clears on a clock
    DARK_REVOKED = 25  # check 4, source revoked: a clock never clears it
    BLOCKED = 26  # check 5
    CI_RED = 28  # no longer produced: check 7 is advisory (a red baseline is recorded, not refused)
    UNREACHABLE = 30  # check 8: no token came back, nothing ran
    NO_PERMISSION = 31  # check 8: the master cannot write its state directory
    NO_RUNNER = 32  # check 8: fleet's runner is not installed for this master
    CLONE_UNSYNCED = 33  # check 9
    CLONE_FOREIGN_ORIGIN = 34  # check 9: the clone's origin is not the inventory's
    # the fresh read of the issue re-asks the scheduler's marker predicates and approval (D15)
    LATCHED = 35  # predicate 6: the last marker latches (start, success, block, no-op, cancel, ...)
    EXHAUSTED = 36  # predicate 7: the attempt budget is spent
    MARKER_PARKED = 37  # predicate 8: a hold latch, or a retry parked until a later time
    UNAPPROVED = 38  # predicate 12: an untrusted author's issue no trusted person approved
    CAPACITY_LOOP = 39  # predicate 7: the issue's capacity outcomes reached policy.capacity_cap
    LATCHED_UNDER_LOCK = 40  # checks 6/10: re-read under the lock, the last word now latches
    HELD_LIVE = 41  # check 10: same worker, the unit is live
    HELD_FINISHED = 42  # check 10: the name is held by a finished unit still unloading
    SUPERVISOR_FAILED = 43  # check 10: the supervisor failed, not a collision
    LOCK_TIMEOUT = 44  # another dispatcher held the fleet lock past the bounded wait
    NO_SUCH_WORKER = 45  # --worker names no worker in the inventory
    HELD_OTHER_WORKER = (
        46  # checks 6/10: a live task-N on another worker or master (under the lock)
    )
    ALL_DARK = 47  # check 4, no --worker: every reachable worker is capacity-dark
    NONE_REACHABLE = 48  # check 8, no --worker: no worker answered the probe
    CLAIM_UNCONFIRMED = 49  # check 10: the claim was sent but no answer came back; it may be live
    # the queue and the journal
    BOARD_UNREADABLE = 50  # the one fail-closed guard (D5), for --apply
    WRITE_FAILED = 51  # a board write did not take ("no work exists" is 0, never this)
    SWEEP_CRASHED = 52  # an error escaped a sweep: the heartbeat names it, stderr traces it
    IDENTITY_MISMATCH = 54  # the token's login is not the inventory's identity: nothing written
    LABELS_DROPPED = 55  # filed without its labels (no push access), so closed at once
    DOCTOR_FAILED = 56  # invoke doctor: at least one check failed (each is named with its fix)
    NOTHING_TO_REPLAY = 58  # replay read the trace and found no replayable event in it
    TRACE_UNREADABLE = 59  # replay: a missing file, or a malformed line (file:line on stderr)
    REPLAY_DIFFERS = 60  # replay found a decision that differs from the recorded one
    NOT_IDLE = 61  # drain --wait gave up while units were still live
    REPAIR_STOP_FAILED = 62  # repair could not stop a duplicate unit: it may still be live
    REPAIR_UNDECIDED = 63  # repair left duplicates live: a start time its order needs is unknown
    # cancel: the cancelled marker was posted, but the unit may still be live somewhere
    NO_BROWSER = 65  # timeline --png: no headless Chromium here; the HTML page was written
    PNG_FAILED = 66  # timeline --png: Chromium ran but wrote no picture; the HTML page was written
    CANCEL_UNCHECKED = 67  # a worker could not be probed: could-not-check, never "no unit" (D20)
    CANCEL_NOT_STOPPED = 68  # a live unit was found and its stop did not free the name


class RunExit(IntEnum):
    """The runner's exit codes (inside the unit). Non-zero fires the unit's OnFailure= alarm."""

    OK = 0  # a terminal marker was posted and it is not a failure
    FAILED = 1  # a terminal marker was posted: failed, timed out or garbled
    STALE = 70  # step 1: the runner's clone could not be synced, so it did not run (D11)
    CLOSEOUT_FAILED = 71  # step 8: the terminal marker could not be posted, even after a retry
    NO_START = 72  # step 4: the start marker could not be posted, so nothing ran
    NO_CONFIG = (
        73  # the inventory, the worker's entry or the board could not be opened: nothing ran
    )
    CRASHED = 74  # an unexpected error escaped the runner (journal has the traceback); no terminal
    IDENTITY_MISMATCH = 76  # the worker's token is not the inventory's identity: nothing posted


# The runner's exits before its start marker (run step 4): nothing on the board says the launch
# happened, so the runner records each on its worker (fleet.runner.prestart) and selection counts
# them (state dead-on-launch). The words say the cause in fleet-status and the record.
PRESTART_CAUSES = {
    RunExit.STALE: "stale runner clone",
    RunExit.NO_CONFIG: "inventory/worker/board not openable",
    RunExit.CRASHED: "crash",
    RunExit.IDENTITY_MISMATCH: "the worker's token is not the board identity",
}
