"""A stand-in coding agent: does real git work against the local forge and prints what a real agent
CLI prints, so the runner, the demo and the tests exercise every outcome without a model.

Run as ``python -m fleet.agents.demo`` with the run's worktree as cwd. It reads:

``FLEET_ISSUE``        the issue number
``FLEET_FORGE``        the run's gate to the embedded forge (``fleet.runner.forge_gate``): the
                       agent's only door to the board — it reads its issue, opens and merges PRs
``FLEET_RESULTS``      the results file (D17): where a structured blocker goes
``FLEET_RUN_ID``       this run's id: names the topic branch, so two runs never share one
``FLEET_BRIEF``        the rendered brief; read and acknowledged, as a real agent would

Default behaviour is an honest success: edit ``notes/issue-<N>.md``, commit, push the topic branch
by name, open a PR whose body closes the issue, merge it, then print chatter and what the CLI named
by ``--kind`` prints (docs/agents.md) and exit 0: ``claude`` (default) one result envelope like
``claude -p --output-format json``; ``codex`` the JSONL events of ``codex exec --json``; ``gemini``
the ``{response, stats, error?}`` object of ``gemini -p --output-format json``; ``plain`` free text.

A ``demo:<mode>`` label on the issue selects a fault, each one a real-world failure the runner must
name distinctly (D20): ``rate-limit``, ``rate-limit-unknown``, ``revoked``, ``transient`` (no
envelope: failed before the first turn, D7), ``crash``, ``hang`` (with a child process, so a
tree-kill can be observed, D3), ``wait-go`` (a long run that succeeds once its issue is labelled
``demo:go``: runs that overlap and end out of order), ``loop`` (turn after turn, never
done: D13's max-turns bound), ``no-op``, ``pr-open``, ``left-open`` (merged, declared left open, ends on ``demo:go``: D6), ``blocker``, ``garbled``, and the two
attacks of a model's own words: ``inject-revoked`` and ``inject-limit`` (a final message carrying a
revocation or limit text, exit 0). Every mode exists for every kind; where a CLI documents no text
for a failure (a Codex or Gemini limit), the stand-in prints words marked as its own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleet.core.model import Issue
from fleet.runner.forge_gate import ENV_VAR as FORGE_ENV
from fleet.runner.forge_gate import ForgeClient

MODE_PREFIX = "demo:"

# How long the hang mode sleeps (seconds) when nothing kills it. It exists to be killed by the
# supervisor's stop or run time limit; the bound only stops a leaked demo from living forever.
HANG_S = int(os.environ.get("FLEET_DEMO_HANG_S", "3600"))

# The identity the demo commits as: a fixed, obviously fake address (RFC 2606 reserves .invalid).
GIT_IDENTITY = ("-c", "user.name=fleet demo agent", "-c", "user.email=demo-agent@fleet.invalid")

EXIT_USAGE = 2  # the environment the runner owes the agent is missing: nothing was attempted


@dataclass(frozen=True)
class Run:
    issue: Issue
    board: ForgeClient
    run_id: str
    results: Path | None
    started: float
    kind: str = "claude"
    max_turns: int | None = None  # Claude Code's own --max-turns flag, when the runner passed it

    @property
    def number(self) -> int:
        return self.issue.number

    @property
    def branch(self) -> str:
        return f"fleet/issue-{self.number}-{self.run_id}"


# -- what a real CLI prints ---------------------------------------------------------------------


def _say(line: str, *, err: bool = True) -> None:
    stream = sys.stderr if err else sys.stdout
    print(line, file=stream, flush=True)


def _chatter(run: Run) -> None:
    """Noise around the envelope, as a merged stdout+stderr capture really holds (D7)."""
    _say(f"[demo] session for issue #{run.number}, run {run.run_id}")
    _say("[demo] config {loaded from env", err=False)  # a stray brace the envelope scan must skip
    _say("[demo] tools: bash, edit, git", err=False)


def _envelope(run: Run, *, result: str, turns: int, **fields: object) -> None:
    """Print what the run's CLI kind prints at the end of a run that reached the model."""
    if run.kind == "codex":
        _codex(run, result=result, turns=turns, failed=bool(fields.get("is_error")))
    elif run.kind == "gemini":
        _gemini(run, result=result, turns=turns, error=fields.get("error_text"))
    elif run.kind == "plain":
        _say(f"[demo] {result}", err=False)
    else:
        fields.pop("error_text", None)
        _claude(run, result=result, turns=turns, **fields)


def _claude(run: Run, *, result: str, turns: int, **fields: object) -> None:
    """ONE result envelope as the last thing on stdout (``claude -p --output-format json``)."""
    elapsed = int((time.monotonic() - run.started) * 1000)
    envelope: dict[str, object] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": elapsed,
        "duration_api_ms": elapsed,
        "num_turns": turns,
        "session_id": str(uuid.uuid4()),
        "result": result,
        "stop_reason": "end_turn",
        "total_cost_usd": 0.0,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "permission_denials": [],
        "errors": [],
        "api_error_status": None,
        "terminal_reason": "completed",
    }
    envelope.update(fields)
    _say(json.dumps(envelope), err=False)


def _event(obj: dict[str, object]) -> None:
    _say(json.dumps(obj), err=False)


def _codex(run: Run, *, result: str, turns: int, failed: bool = False) -> None:
    """The JSONL events of ``codex exec --json``: one turn per prompt, items inside it."""
    _event({"type": "thread.started", "thread_id": f"demo-{run.run_id}"})
    _event({"type": "turn.started"})
    for i in range(turns):
        item = {"id": f"item_{i}", "type": "command_execution", "command": "git status"}
        _event({"type": "item.completed", "item": {**item, "status": "completed"}})
    if failed:
        _event({"type": "turn.failed", "error": {"message": result}})
        return
    _event({"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": result}})
    usage = {"input_tokens": 100 * turns, "cached_input_tokens": 0, "output_tokens": 10 * turns}
    _event({"type": "turn.completed", "usage": usage})


def _gemini(run: Run, *, result: str, turns: int, error: object = None) -> None:
    """ONE object ``{response, stats, error?}`` (``gemini -p … --output-format json``)."""
    model = {"api": {"totalRequests": turns, "totalErrors": 0}, "tokens": {"total": 110 * turns}}
    obj: dict[str, object] = {"response": result, "stats": {"models": {"demo-model": model}}}
    if error is not None:
        obj["error"] = {"type": "DemoError", "message": error}
    _say(json.dumps(obj, indent=2), err=False)


# -- real work ---------------------------------------------------------------------------------


def _git(*args: str) -> None:
    subprocess.run(["git", *GIT_IDENTITY, *args], check=True, stdout=sys.stderr)


def _edit(run: Run) -> Path:
    note = Path("notes") / f"issue-{run.number}.md"
    note.parent.mkdir(exist_ok=True)
    with note.open("a", encoding="utf-8") as fh:
        fh.write(f"- run {run.run_id}: {run.issue.title}\n")
    return note


def _ship(run: Run, *, merge: bool) -> int:
    """Edit, commit, push the topic branch by name, open the PR, and merge it if asked."""
    note = _edit(run)
    _git("add", "--", str(note))
    _git("commit", "-q", "-m", f"notes: issue {run.number} ({run.run_id})")
    _git("push", "-q", "origin", f"HEAD:refs/heads/{run.branch}")
    body = f"Closes #{run.number}\n\nRun {run.run_id} wrote {note}."
    pr = run.board.create_pr(run.branch, run.issue.title, body, author="agent")
    _chatter(run)
    if not merge:
        _envelope(run, result=f"Opened PR #{pr.number}; not merged.", turns=4)
        return 0
    pr = run.board.merge_pr(pr.number, merged_by="agent")
    _envelope(run, result=f"PR #{pr.number} merged for issue {run.number}.", turns=6)
    return 0


# -- the modes ---------------------------------------------------------------------------------


def _default(run: Run) -> int:
    return _ship(run, merge=True)


def _pr_open(run: Run) -> int:
    return _ship(run, merge=False)


def _left_open(run: Run) -> int:
    """Part of the work merged, the issue deliberately kept open for the rest (D6): it declares why
    in the results file, then waits for ``demo:go`` before ending — the test's hand, which reopens
    the issue the merge closed (the agent has no write to the board but its PRs), as a PR merged
    into another branch would have left it open on GitHub. Bounded by ``HANG_S``."""
    code = _ship(run, merge=True)
    if run.results is not None:
        left = {"reason": "demo: part one merged; the issue stays open for part two"}
        run.results.parent.mkdir(parents=True, exist_ok=True)
        run.results.write_text(json.dumps({"left_open": left}) + "\n", encoding="utf-8")
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        issue = run.board.issue(run.number)
        if issue is not None and GO_LABEL in issue.labels:
            return code
        time.sleep(WAIT_POLL_S)
    return 1


def _no_op(run: Run) -> int:
    _chatter(run)
    _envelope(run, result="Nothing to change: the issue is already satisfied.", turns=2)
    return 0


# The stand-in's words for failures whose real text a CLI does not document: marked as the demo's,
# never passed off as the CLI's (the adapters read them as ``other``, docs/agents.md).
UNDOCUMENTED = "demo: {what} (the real {kind} text is not documented)"


def _limit(run: Run, text: str) -> int:
    return _refused(run, "usage limit", result=text, turns=1, status=429)


def _revoked(run: Run) -> int:
    retry = (
        '{"type":"system","subtype":"api_retry","error_status":401,"error":"authentication_failed"}'
    )
    return _refused(
        run,
        "credential rejected",
        result="OAuth token revoked · Please run /login",
        turns=0,
        status=401,
        first=retry,
    )


def _refused(
    run: Run, what: str, *, result: str, turns: int, status: int, first: str | None = None
) -> int:
    """The provider refused the run: Claude's api_error envelope with the HTTP ``status`` (after
    the ``first`` line it prints, if any); the other kinds' words for ``what`` are the demo's."""
    _chatter(run)
    if run.kind in ("codex", "gemini", "plain"):
        words = UNDOCUMENTED.format(what=what, kind=run.kind)
        _envelope(run, result=words, turns=0, is_error=True, error_text=words)
        return 1
    if first is not None:
        _say(first)
    _envelope(
        run,
        result=result,
        turns=turns,
        is_error=True,
        api_error_status=status,
        terminal_reason="api_error",
        stop_reason=None,
    )
    return 1


def _transient(run: Run) -> int:
    """A failure before the first turn: nothing reached the model, so no result is printed."""
    _say(f"[demo] session for issue #{run.number}, run {run.run_id}")
    if run.kind == "codex":
        _event({"type": "thread.started", "thread_id": f"demo-{run.run_id}"})
        _event({"type": "turn.started"})
        words = "demo: request failed before the first turn: HTTP 503 Service Unavailable"
        _event({"type": "turn.failed", "error": {"message": words}})
        return 1
    for _ in range(2):
        _say(
            'API Error: 529 {"type":"error","error":{"type":"overloaded_error",'
            '"message":"Overloaded"}}'
        )
    return 1


def _inject(run: Run, words: str) -> int:
    """The model's own final message carries a limit or a revocation text, exit 0 (#16)."""
    _chatter(run)
    _envelope(run, result=words, turns=3)
    return 0


def _crash(run: Run) -> int:
    _chatter(run)
    _edit(run)
    raise RuntimeError(f"demo crash while working on issue {run.number}")


def _hang(run: Run) -> int:
    _chatter(run)
    child = subprocess.Popen(["sleep", str(HANG_S)])
    _say(f"[demo] hanging; child sleep pid {child.pid}, own pid {os.getpid()}")
    time.sleep(HANG_S)
    return 1


def _wait_go(run: Run) -> int:
    """A long run that ends cleanly when told: it polls its issue for the ``demo:go`` label (the
    test's hand on the run's length, never a sleep it guesses), then does the default work. Bounded
    by ``HANG_S`` like ``hang``."""
    _chatter(run)
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:
        issue = run.board.issue(run.number)
        if issue is not None and GO_LABEL in issue.labels:
            return _default(run)
        time.sleep(WAIT_POLL_S)
    return 1


# The loop mode's pace: one tool-call turn per this many seconds, slow enough that the runner's
# turn count (every 2 s) sees the bound passed after a few looks, fast enough for a test.
LOOP_TURN_S = 0.1


def _loop(run: Run) -> int:
    """An agent stuck in a loop of tool calls, the stuck task D13's max turns bounds. Claude honours
    its own ``--max-turns`` (ending as Claude Code does, ``error_max_turns``); Codex streams a turn
    per step and never stops by itself; Gemini and a plain agent print nothing countable."""
    _chatter(run)
    deadline = time.monotonic() + HANG_S
    turn = 0
    while time.monotonic() < deadline:
        if run.kind == "claude" and run.max_turns is not None and turn >= run.max_turns:
            _claude(
                run,
                result="",
                turns=turn,
                subtype="error_max_turns",
                is_error=True,
                terminal_reason="max_turns",
            )
            return 1
        turn += 1
        if run.kind == "codex":
            _event({"type": "turn.started"})
            item = {"id": f"item_{turn}", "type": "command_execution", "command": "git status"}
            _event({"type": "item.completed", "item": {**item, "status": "completed"}})
            _event({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 1}})
        time.sleep(LOOP_TURN_S)
    return 1


def _blocker(run: Run) -> int:
    _chatter(run)
    needs = list(run.issue.open_blockers)
    blocker = {"reason": "demo: an input this issue needs does not exist yet", "needs": needs}
    if run.results is None:
        _say("[demo] FLEET_RESULTS is not set: cannot declare the blocker")
        return EXIT_USAGE
    run.results.parent.mkdir(parents=True, exist_ok=True)
    run.results.write_text(json.dumps({"blocker": blocker}) + "\n", encoding="utf-8")
    _envelope(run, result="Blocked: declared in the results file.", turns=3)
    return 0


def _garbled(run: Run) -> int:
    _chatter(run)
    cut = {
        "codex": '{"type":"turn.completed","usage":{"input_tokens":12',
        "gemini": '{"response": "Done, op',
        "plain": "Done, op",
    }
    _say(
        cut.get(
            run.kind,
            '{"type":"result","subtype":"success","is_error":false,"num_turns":5,"result":"Done, op',
        ),
        err=False,
    )
    return 0


MODES: dict[str, Callable[[Run], int]] = {
    "default": _default,
    "no-op": _no_op,
    "pr-open": _pr_open,
    "rate-limit": lambda run: _limit(run, "You've hit your limit · resets 3pm (Europe/Lisbon)"),
    "rate-limit-unknown": lambda run: _limit(run, "You've hit your session limit"),
    "revoked": _revoked,
    "transient": _transient,
    "crash": _crash,
    "hang": _hang,
    "wait-go": _wait_go,
    "loop": _loop,
    "left-open": _left_open,
    "blocker": _blocker,
    "garbled": _garbled,
    "inject-revoked": lambda run: _inject(run, "Invalid API key · Please run /login"),
    "inject-limit": lambda run: _inject(run, "Claude AI usage limit reached|1000000000"),
}


ONCE_LABEL = "demo:once"  # the fault fires on the first run only; later runs do the work
GO_LABEL = "demo:go"  # ends a wait-go run: it then does the default work
WAIT_POLL_S = 0.5  # how often wait-go reads its issue (one SQLite read; the board is local)


def _ran_before(issue: Issue) -> bool:
    """True when an earlier run of this issue already ended (any terminal marker)."""
    from fleet.core.markers import TERMINAL, markers_of

    return any(m.kind in TERMINAL for m in markers_of(issue.comments))


def mode_of(issue: Issue) -> str:
    """The first ``demo:<mode>`` label naming a known mode; ``default`` when there is none, or
    when ``demo:once`` is set and an earlier run already hit the fault (a rate-limited box, then
    a healthy one that does the work: D8's shape)."""
    if ONCE_LABEL in issue.labels and _ran_before(issue):
        return "default"
    for label in issue.labels:
        if label.startswith(MODE_PREFIX) and label[len(MODE_PREFIX) :] in MODES:
            return label[len(MODE_PREFIX) :]
    return "default"


KINDS = ("claude", "codex", "gemini", "plain")


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    parser = argparse.ArgumentParser(prog="python -m fleet.agents.demo", description=__doc__)
    parser.add_argument("--kind", choices=KINDS, default="claude", help="the CLI to speak as")
    parser.add_argument("--max-turns", type=int, default=None, help="Claude Code's turn bound")
    args, _rest = parser.parse_known_args(argv)  # a real CLI's other flags are ignored
    env = os.environ
    missing = [k for k in ("FLEET_ISSUE", FORGE_ENV) if not env.get(k)]
    if missing or not env.get("FLEET_ISSUE", "").isdigit():
        _say(f"demo agent: missing or bad environment: {', '.join(missing) or 'FLEET_ISSUE'}")
        return EXIT_USAGE
    brief = env.get("FLEET_BRIEF")
    if brief and Path(brief).is_file():
        first = Path(brief).read_text(encoding="utf-8").splitlines()[:1]
        _say(f"[demo] brief read: {first[0] if first else '(empty)'}")
    else:
        _say(f"[demo] no brief at {brief!r}; working from the issue alone")
    board = ForgeClient(Path(env[FORGE_ENV]))
    try:
        issue = board.issue(int(env["FLEET_ISSUE"]))
        if issue is None:
            _say(f"demo agent: issue #{env['FLEET_ISSUE']} is not on the board")
            return 1
        results = Path(env["FLEET_RESULTS"]) if env.get("FLEET_RESULTS") else None
        run_id = env.get("FLEET_RUN_ID") or "local"
        run = Run(issue, board, run_id, results, started, args.kind, args.max_turns)
        return MODES[mode_of(issue)](run)
    finally:
        board.disconnect()


if __name__ == "__main__":
    sys.exit(main())
