"""Check 9's clone sync, run for real with git and /bin/sh: the script dispatch sends."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleet.sync import SyncState, parse_sync, sync_command


def _sh(cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload]


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    o = tmp_path / "origin.git"
    seed = tmp_path / "seed"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(o)], check=True)
    subprocess.run(["git", "clone", "-q", str(o), str(seed)], check=True, capture_output=True)
    git = ["git", "-C", str(seed), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    subprocess.run([*git, "push", "-q", "origin", "HEAD:main"], check=True)
    return o


def test_four_dispatchers_syncing_one_missing_clone_all_succeed(
    origin: Path, tmp_path: Path
) -> None:
    # Without the clone lock two first-time clones of one path collide (seen: 1-3 of 4 failed).
    cmd = sync_command(str(tmp_path / "w" / "clone"), origin=str(origin), note="race")
    procs = [
        subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    states = [parse_sync(p.communicate(timeout=120)[0]).state for p in procs]
    assert states == [SyncState.OK] * 4


def test_a_dirty_clone_is_stashed_never_discarded(origin: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    cmd = sync_command(str(clone), origin=str(origin), note="run r1 of #7")
    assert parse_sync(_sh(cmd).stdout).state is SyncState.OK
    (clone / "work.txt").write_text("precious edit\n")
    out = parse_sync(_sh(cmd).stdout)
    assert out.state is SyncState.STASHED
    shown = _sh(f"git -C {clone} stash show -p --include-untracked stash@{{0}}").stdout
    assert "precious edit" in shown
    assert "run r1 of #7" in _sh(f"git -C {clone} stash list").stdout


def test_no_origin_and_no_clone_fails_with_its_reason(tmp_path: Path) -> None:
    out = parse_sync(_sh(sync_command(str(tmp_path / "nowhere"), origin=None)).stdout)
    assert out.state is SyncState.FAILED and "no origin" in out.detail


def test_silence_is_nothing_ran() -> None:
    assert parse_sync("motd\n").state is SyncState.NOTHING_RAN
    assert parse_sync(None).state is SyncState.NOTHING_RAN


# -- every inventory value is quoted; the origin is the inventory's (issue 16) -------------------

ODD_NAMES = [
    "sp ace'$(touch PWNED)'",  # balanced quotes: unquoted, the $() ran
    "q\"uo'te $(touch PWNED) `touch PWNED`",  # unbalanced: unquoted, the script did not parse
]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_a_clone_path_with_spaces_quotes_and_substitutions_syncs_and_runs_nothing(
    origin: Path, tmp_path: Path, name: str
) -> None:
    # A flock that never takes the lock sends the script down its warning branch, the one that
    # printed the clone path unquoted.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "flock").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "flock").chmod(0o755)
    odd_origin = tmp_path / f"o {name}.git"
    origin.rename(odd_origin)
    clone = tmp_path / name / "clone"
    cmd = sync_command(str(clone), origin=str(odd_origin), note=f"run {name}")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for expected in (SyncState.OK, SyncState.OK):  # the clone is made, then synced again
        res = _sh(cmd, cwd=tmp_path, env=env)
        assert parse_sync(res.stdout).state is expected, res.stdout + res.stderr
        assert "not taken; syncing anyway" in res.stderr
    assert (clone / ".git").is_dir()
    assert not list(tmp_path.rglob("PWNED"))


def _bare_copy(origin: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(where)], check=True)
    return where


@pytest.mark.parametrize("how", ["set-url", "push-url", "insteadOf"])
def test_a_clone_whose_origin_was_rewritten_is_refused_before_anything_is_fetched(
    origin: Path, tmp_path: Path, how: str
) -> None:
    clone = tmp_path / "clone"
    cmd = sync_command(str(clone), origin=str(origin), note="run r1 of #7")
    assert parse_sync(_sh(cmd).stdout).state is SyncState.OK
    evil = _bare_copy(origin, tmp_path / "evil.git")
    edit = {
        "set-url": ["remote", "set-url", "origin", str(evil)],
        "push-url": ["remote", "set-url", "--push", "origin", str(evil)],
        "insteadOf": ["config", f"url.{evil}.insteadOf", str(origin)],
    }[how]
    subprocess.run(["git", "-C", str(clone), *edit], check=True)

    out = parse_sync(_sh(cmd).stdout)

    assert out.state is SyncState.FOREIGN_ORIGIN and out.detail == str(evil)
    assert not out.synced
