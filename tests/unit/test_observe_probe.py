"""The per-worker probe command (check 8 + the worker's PATH + check 4's capacity file), run in a
real shell. An ssh worker's paths may be relative to the master's home (the inventory's rule)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleet.core.model import Reach
from fleet.inventory import loads
from fleet.observe import probe_command, split_probe
from fleet.transport import RunResult, parse_reach, remote_path


def _ssh_worker(state_dir: str):  # type: ignore[no-untyped-def]
    inv = loads(
        "workers:\n  - name: w\n    transport: ssh\n    host: 127.0.0.1\n    master: m\n"
        f"    python: {sys.executable}\n    state_dir: {state_dir}\n"
    )
    return inv.workers[0]


def test_a_relative_state_dir_is_relative_to_home_and_probes(tmp_path: Path) -> None:
    w = _ssh_worker("fleet-state")
    (tmp_path / "fleet-state").mkdir()
    (tmp_path / "fleet-state" / "capacity.json").write_text('{"source": "revoked"}')
    res = subprocess.run(
        ["/bin/sh", "-c", probe_command(w)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert parse_reach(RunResult(res.returncode, res.stdout, res.stderr))[0] is Reach.OK, res
    _, path, cap = split_probe(res.stdout)
    assert path.startswith("/usr/bin") and cap == '{"source": "revoked"}'


@pytest.mark.parametrize(
    ("path", "word"),
    [("fleet-state", "fleet-state"), ("/srv/x y", "'/srv/x y'"), ("~/s", '"$HOME"/s')],
)
def test_remote_path_words(path: str, word: str) -> None:
    assert remote_path(path) == word


def test_remote_path_refuses_another_users_home() -> None:
    with pytest.raises(ValueError):
        remote_path("~root/x")
