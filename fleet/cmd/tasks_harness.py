"""invoke tasks for the Docker harness: the ``harness`` collection (``invoke harness.up`` ...).

Thin wrappers over :mod:`fleet.testing.harness`; every step and every check lives there. The Compose
project (and so the container names ``<project>-w1`` ...) is ``$FLEET_HARNESS_PROJECT`` or
``fleet-harness``, so a second harness can run beside the first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from invoke import Collection, task
from invoke.exceptions import Exit as InvokeExit

from fleet.core.exits import Exit

# A harness step that failed (no engine, image missing, a worker not ready): one line, this code.
# USAGE-like, not a dispatch code: nothing here is a fleet decision.
HARNESS_FAILED = Exit.USAGE


def _fail(exc: Exception) -> InvokeExit:
    return InvokeExit(f"harness: {exc}", code=int(HARNESS_FAILED))


def _progress(line: str) -> None:
    print(line, flush=True)


@contextmanager
def _build_progress() -> Iterator[Callable[[str], None]]:
    """The image build's progress: on a terminal one line redrawn in place (elapsed time and the
    build's latest output) under its steps; elsewhere every line, as the build prints it."""
    from fleet.views.progress import Meter

    if not sys.stdout.isatty():
        yield _progress
        return
    with Meter("harness: worker image") as meter:

        def progress(line: str) -> None:
            if line.startswith("  "):  # a streamed line of pip, mmdebstrap or docker import
                meter.update(None, line.strip()[:100])
            else:  # a step of the build
                meter.line(line)
                meter.update(None, line[:100])

        yield progress


def docker_tests_env() -> dict[str, str]:
    """For ``invoke test``: ``FLEET_DOCKER=1`` when a Docker engine answers, after building the
    worker image here with its progress shown (minutes the first time; the test session would
    otherwise build it silently). Without an engine: one line saying why, and no variable, so the
    harness tests skip from conftest's one line."""
    from fleet.testing import harness

    ok, why = harness.engine_available()
    if not ok:
        print(f"harness: docker tests skipped: {why}", flush=True)
        return {}
    print(f"harness: {why}; the docker tests run (project {harness.project()})", flush=True)
    try:
        with _build_progress() as progress:
            harness.build_image(progress=progress)
    except harness.HarnessError as exc:  # an engine but no image: fail loudly, never skip
        raise _fail(exc) from None
    return {"FLEET_DOCKER": "1"}


@task(name="image")
def image(c):
    """Build the worker image from Debian's packages, or reuse it when its inputs are unchanged."""
    from fleet.testing import harness

    try:
        with _build_progress() as progress:
            tag = harness.build_image(progress=progress)
    except harness.HarnessError as exc:
        raise _fail(exc) from None
    print(tag)


@task(name="up", help={"shared": "host directory shared with the workers (default: per project)"})
def up(c, shared=None):
    """Start the four workers (w1..w4; w4 has masters alpha and beta) and wait until every master
    answers; prints each worker's SSH port on 127.0.0.1."""
    from fleet.testing import harness

    try:
        info = harness.up(Path(shared).absolute() if shared else None)
    except harness.HarnessError as exc:
        raise _fail(exc) from None
    for ep in info.endpoints():
        print(f"{ep.name}: ssh -p {ep.port} {ep.master}@127.0.0.1 ({ep.container.container})")
    print(f"shared directory: {info.shared_dir}")
    print(f"known_hosts: {info.known_hosts}  key: {info.key}")
    print("next: invoke harness.inventory")


@task(name="down")
def down(c):
    """Stop and remove this project's workers and network (a harness that is not up is fine)."""
    from fleet.testing import harness

    try:
        harness.down()
    except harness.HarnessError as exc:
        raise _fail(exc) from None
    print(f"harness {harness.project()} is down")


@task(
    name="inventory",
    help={
        "path": "where to write it; must be inside the shared directory "
        "(default: <shared>/<name>/inventory.yaml)",
        "name": "the fleet's name: its board, origin and clones (default: board)",
    },
)
def inventory(c, path=None, name="board"):
    """Write the harness inventory with the ports published now, and make what it names: the board
    and origin in the shared directory and every master's runner clone. Rerun after every up."""
    from fleet.testing import harness

    try:
        info = harness.refresh()
    except FileNotFoundError:  # no state recorded: `up` never ran for this project
        raise _fail(RuntimeError(f"{harness.project()} is not up: invoke harness.up")) from None
    except harness.HarnessError as exc:
        raise _fail(exc) from None
    try:
        written = harness.deploy(
            info,
            name,
            path=Path(path).absolute() if path else None,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except harness.HarnessError as exc:
        raise _fail(exc) from None
    print(written)
    print(f"use it: export FLEET_INVENTORY={written}", file=sys.stderr)


harness = Collection("harness", image, up, down, inventory)
