"""Fixtures for the four-worker Docker harness (``pytest -m docker``).

The harness needs an engine and ~20 s per session, so these tests run only when asked: with
``-m docker`` (what ``.ci/run`` passes) or ``FLEET_DOCKER=1``. Otherwise, and when no engine
answers, every test here is skipped from one line of this file, so ``-ra`` shows ONE line.

The workers are started through pytest-docker (Compose v1: ``docker-compose``, setup ``up -d``: v1
has no ``--wait``, and prints its usage and exits 0 on an unknown option), wrapped by
:mod:`fleet.testing.harness`, which checks the image before and the running containers after, reads the
ports from ``docker port`` and writes the known_hosts. ``down`` runs whatever happened.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fleet.testing import harness

_WANTED_ENV = "FLEET_DOCKER"
_ENGINE = pytest.StashKey[tuple[bool, str]]()


def _wanted(config: pytest.Config) -> bool:
    markexpr = config.getoption("markexpr", "") or ""
    return os.environ.get(_WANTED_ENV) == "1" or (
        "docker" in markexpr and "not docker" not in markexpr
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.docker)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip each test here from this one line, before any fixture starts anything.

    Raised from a hook (not a fixture), the skip is reported at this line for every test, so
    ``-ra`` folds them into ONE line with the reason.
    """
    if not _wanted(item.config):
        pytest.skip(f"docker harness tests run only with `-m docker` or {_WANTED_ENV}=1")
    if _ENGINE not in item.config.stash:  # asked once per session: `docker info` is ~50 ms
        item.config.stash[_ENGINE] = harness.engine_available()
    ok, why = item.config.stash[_ENGINE]
    if not ok:
        pytest.skip(f"docker harness tests need a Docker engine: {why}")


@pytest.fixture(scope="session")
def harness_image() -> str:
    """The worker image for the current build inputs, built once if missing (minutes), else reused."""
    return harness.build_image(progress=lambda line: None)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness-shared")


@pytest.fixture(scope="session")
def _harness_env(harness_image: str, shared_dir: Path) -> Iterator[dict[str, str]]:
    """Compose's variables in this process's environment, where pytest-docker's commands read them."""
    env = harness.prepare(shared_dir)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# pytest-docker's configuration: Compose v1, our files and project, no --build/--wait.
@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    return "docker-compose"


@pytest.fixture(scope="session")
def docker_compose_file() -> list[str]:
    return harness.compose_files()


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return harness.project()


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    return ["up -d --no-build"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down --remove-orphans --timeout 10"]


@pytest.fixture(scope="session")
def harness_info(
    request: pytest.FixtureRequest, _harness_env: dict[str, str]
) -> harness.HarnessInfo:
    """The running harness: pytest-docker brought it up; ports, known_hosts and readiness are ours.

    ``harness.down`` is registered first, so it runs even when ``up -d`` itself fails (pytest-docker
    cleans up only after a setup that succeeded).
    """
    request.addfinalizer(harness.down)
    request.getfixturevalue("docker_services")
    info = harness.refresh(Path(_harness_env["FLEET_HARNESS_SHARED"]))
    harness.wait_ready(info)
    return info


@pytest.fixture(scope="session")
def harness_deploy(harness_info: harness.HarnessInfo) -> Callable[[str], Path]:
    """``harness_deploy(name)`` -> the inventory of a working fleet named ``name`` on the harness.

    Each name is its own board, origin and target clones (``harness.deploy``), made once per session;
    every master's runner clone holds the code under test. A test module picks its own name, so
    its issues, markers and clones never meet another module's.
    """
    made: dict[str, Path] = {}

    def deploy(name: str) -> Path:
        if name not in made:
            made[name] = harness.deploy(harness_info, name, progress=lambda line: None)
        return made[name]

    return deploy
