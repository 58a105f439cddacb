"""invoke tasks for the replay commands;
``fleet.cmd.collection`` adds every task in ``TASKS`` to the top level."""

from __future__ import annotations

from invoke import Task, task

REPLAY_HELP = """Replay a trace: each recorded snapshot back through the pure decision that planned it.

Every decision that comes out differently is printed per issue, recorded vs now (seed 001 §14).
TRACE is a trace.jsonl (the sweeper writes <state_dir>/trace.jsonl).

Exit codes: 0 every decision reproduced   60 a decision differs
            59 the trace is missing or a line is malformed (file:line on stderr)
            58 the trace holds no replayable event (nothing was compared)
"""


@task(help={"trace": "the trace.jsonl to replay", "json": "one JSON object"})
def replay(c, trace, json=False):
    from fleet.cmd.replay import replay as run

    run(trace, json)


replay.__doc__ = REPLAY_HELP

TASKS: tuple[Task, ...] = (replay,)
