"""invoke tasks for the queue: the sweeper, the hand dispatch, the views, the demo and the tests.
Thin wrappers only: every decision lives in ``fleet/``; each task imports its glue when it runs."""

from __future__ import annotations

from invoke import Context, Task, task

from fleet.cmd.shared_help import INV, dispatch_help


# -- the queue --------------------------------------------------------------------------------
@task(
    help={
        **INV,
        "apply": "dispatch the plan (default: dry run, print it)",
        "json": "one JSON object",
        "timeline": "after the tick, rewrite <state_dir>/timeline.html (the last 24h)",
    }
)
def schedule(c, apply=False, json=False, timeline=False, inventory=None):
    """The sweeper: read the board once, probe the fleet once, plan, and (with --apply) dispatch."""
    from fleet.cmd.sched import schedule as run

    run(inventory, apply, json, timeline)


@task(
    help={
        **INV,
        "json": "one JSON object",
        "no_probe": "do not file the fixture-labelled probe issue (skips the write check)",
    }
)
def doctor(c, json=False, no_probe=False, inventory=None):
    """Every check a first run depends on: a pass/fail line each, its reason and its fix."""
    from fleet.cmd.doctor import doctor as run

    run(inventory, json, not no_probe)


@task(
    name="fleet-status",
    help={
        **INV,
        "json": "one JSON object",
        "issue": "only this issue",
        "cost": "also what reading the board cost: this read, the budget left, recent sweeps (D1)",
        "watch": "redraw until Ctrl-C: in place on a terminal, plain lines elsewhere",
        "every": "seconds between redraws with --watch (default 10, at least 1: each is a board read)",
    },
)
def fleet_status(c, json=False, issue=None, cost=False, watch=False, every=None, inventory=None):
    """Every worker and every open issue, each with its state and why it is not moving."""
    from fleet.cmd.status import status, watch_status

    number = int(issue) if issue else None
    if watch and json:
        from fleet.cmd.common import fail
        from fleet.core.exits import Exit

        raise fail(Exit.USAGE, "fleet-status: --watch redraws text; --json prints one object")
    if watch:
        watch_status(inventory, number, cost, float(every) if every else None)
        return
    status(inventory, json, number, show_cost=cost)


@task(
    help={
        **INV,
        "since": "how far back: 90m, 24h, 7d (default 24h)",
        "issue": "only this issue's runs",
        "out": "the HTML page to write (default: <state_dir>/timeline.html)",
        "png": "also draw it as a PNG beside the page (headless Chromium)",
    }
)
def timeline(c, since="24h", issue=None, out=None, png=False, inventory=None):
    """The fleet's runs as a picture: one lane per worker, a bar per run coloured by its outcome,
    capacity-dark periods, sweeps, halts/pauses/drains; one self-contained HTML page."""
    from fleet.cmd.timeline import timeline as run

    run(inventory, since, int(issue) if issue else None, out, png)


@task(
    help={
        **INV,
        "issue": "issue number",
        "worker": "worker name (default: lane first, then any healthy)",
        "dry_run": "run every check, launch nothing",
        "json": "print one JSON object last",
        "ignore_ci": "silence check 7's red-baseline warning (check 7 is advisory: it never refuses)",
    }
)
def dispatch(c, issue, worker=None, dry_run=False, json=False, ignore_ci=False, inventory=None):
    from fleet.cmd.dispatch import dispatch_cmd

    dispatch_cmd(inventory, int(issue), worker, dry_run, json, ignore_ci)


dispatch.__doc__ = dispatch_help()


@task(
    help={
        "keep": "keep .fleet/demo from the last run instead of starting fresh",
        "agent": "the CLI the stand-in agent speaks: claude (default), codex, gemini or plain",
    }
)
def demo(c, keep=False, agent="claude"):
    """Run the main job on the embedded default: file sample issues and drain them until idle."""
    from fleet.cmd.common import fail
    from fleet.core.exits import Exit
    from fleet.demo import DemoRefused, run_demo

    try:
        run_demo(keep=keep, agent=agent)
    except DemoRefused as exc:
        raise fail(Exit.USAGE, str(exc)) from None


# The tiers of the suite, as pytest marker expressions: `invoke test` everything but the long
# races (which keep every guarantee's overlapping case in fewer rounds), `--fast` also without the
# harness and the tests marked slow, and `invoke stress` the long races at the issue's figures.
SUITE = "not stress"
FAST = "not stress and not slow and not docker"
STRESS = "stress"


@task(
    help={
        "k": "pytest -k expression",
        "docker": "run the Docker harness tests when an engine answers (--no-docker: skip them)",
        "fast": "leave out the harness and the slow tests (a few minutes on two cores)",
    }
)
def test(c, k=None, docker=True, fast=False):
    """Check the rules (ruff, the import-linter layers, mypy), install Debian's chromium when
    missing (the timeline's browser tests) and sshd (the SSH transport tests start a real one),
    then run the test suite (pytest); with a Docker engine, build the harness image (or reuse it)
    and run the harness tests too (tests/docker: FLEET_DOCKER=1). The long races are
    ``invoke stress``."""
    _rules(c)
    _suite(c, FAST if fast else SUITE, k=k, docker=docker and not fast)


@task(help={"k": "pytest -k expression"})
def stress(c, k=None):
    """The long races and load runs at the issues' figures (8 dispatchers x 200 rounds on the
    harness, the sweeper against a hand 50 times, 50 rounds between two local workers)."""
    _suite(c, STRESS, k=k, docker=True)


def _rules(c: Context) -> None:
    """The layers, the types and the lint are rules of the codebase: a break fails like a test."""
    import shlex
    import sys
    from pathlib import Path

    c.run(f"{shlex.quote(sys.executable)} -m ruff check .", pty=False)
    lint_imports = Path(sys.executable).parent / "lint-imports"  # installed beside this python
    c.run(shlex.quote(str(lint_imports)), pty=False)
    c.run(f"{shlex.quote(sys.executable)} -m mypy", pty=False)  # [tool.mypy] in pyproject.toml


def _suite(c: Context, marks: str, *, k: str | None, docker: bool) -> None:
    import shlex
    import subprocess
    import sys

    from fleet.cmd.tasks_harness import docker_tests_env
    from fleet.cmd.testdeps import ssh_tests_env
    from fleet.timeline import browser

    try:  # the timeline's browser tests open pages in Debian's headless Chromium
        browser.ensure(print)
    except (OSError, subprocess.SubprocessError, browser.BrowserError) as exc:
        print(f"chromium could not be installed ({exc}): the timeline browser tests will fail")
    # --durations: the slowest tests in every log, so the tiers above stay measured.
    args = [sys.executable, "-m", "pytest", "-q", "-m", marks, "--durations=25"]
    if k:
        args += ["-k", k]
    # sshd first, as the harness installs mmdebstrap: the SSH transport tests start a real one.
    env = ssh_tests_env(lambda line: print(line, flush=True))
    env.update(docker_tests_env() if docker else {})
    c.run(" ".join(shlex.quote(a) for a in args), pty=False, env=env)


TASKS: tuple[Task, ...] = (schedule, doctor, fleet_status, timeline, dispatch, demo, test, stress)
