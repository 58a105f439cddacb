"""Check 9's clone sync, run for real with git and /bin/sh: the script dispatch sends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fleet.core.origin import AcceptedOrigins
from fleet.core.sync import SyncState, parse_sync, sync_command
from fleet.runner.__main__ import sync_runner_clone


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


def _moving_origin(origin: Path, tmp_path: Path, on_second: str) -> None:
    """Make the origin's second upload-pack (the sync's second talk with the remote) first run
    ``on_second`` inside the bare repository: ``main`` moves between the sync's two reads, for
    real, every time — the window a pusher merging into ``main`` hits by chance."""
    count = tmp_path / "upload-pack.count"
    wrapper = tmp_path / "upload-pack"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        f'if [ "$n" = 2 ]; then ( cd {origin} && {on_second} ) >/dev/null 2>&1; fi\n'
        'exec git-upload-pack "$@"\n'
    )
    wrapper.chmod(0o755)
    count.write_text("0")


def _clone_with(origin: Path, clone: Path, wrapper: Path) -> None:
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    subprocess.run(
        ["git", "-C", str(clone), "config", "remote.origin.uploadpack", str(wrapper)], check=True
    )


_ADVANCE = 'git update-ref refs/heads/main "$(git commit-tree -p main -m merged main^{tree})"'


def test_main_moving_on_during_the_sync_is_fresh_not_stale(origin: Path, tmp_path: Path) -> None:
    # A merge lands between the remote's answer and the fetch: the fetched main descends from the
    # answer. Before, the sync compared with an ls-remote taken after the fetch and refused it
    # (149 of 200 dispatches refused in the drain bench).
    _moving_origin(origin, tmp_path, _ADVANCE)
    clone = tmp_path / "clone"
    _clone_with(origin, clone, tmp_path / "upload-pack")
    (tmp_path / "upload-pack.count").write_text("0")
    out = parse_sync(_sh(sync_command(str(clone), origin=str(origin))).stdout)
    assert out.state is SyncState.OK, out.detail
    head = _sh(f"git -C {clone} rev-parse HEAD").stdout.strip()
    assert head == _sh(f"git -C {origin} rev-parse main").stdout.strip()  # the newer main
    assert (tmp_path / "upload-pack.count").read_text().strip() == "2"  # both talks happened


def test_the_runner_step_1_gets_the_same_rule(origin: Path, tmp_path: Path) -> None:
    # Run step 1 (the runner's own clone, before it re-executes) syncs through the same script.
    _moving_origin(origin, tmp_path, _ADVANCE)
    clone = tmp_path / "runner-clone"
    _clone_with(origin, clone, tmp_path / "upload-pack")
    (tmp_path / "upload-pack.count").write_text("0")
    out = sync_runner_clone(str(clone), str(origin), "r1")
    assert out.synced, out.detail


def test_main_rewound_during_the_sync_is_stale(origin: Path, tmp_path: Path) -> None:
    # A force-push rewinds main between the two reads: the fetched ref is behind the answer.
    _sh(f"cd {origin} && {_ADVANCE}")
    _moving_origin(origin, tmp_path, "git update-ref refs/heads/main main~1")
    clone = tmp_path / "clone"
    _clone_with(origin, clone, tmp_path / "upload-pack")
    (tmp_path / "upload-pack.count").write_text("0")
    out = parse_sync(_sh(sync_command(str(clone), origin=str(origin))).stdout)
    assert out.state is SyncState.FAILED and "stale" in out.detail


def test_a_fetch_that_moves_nothing_is_stale(origin: Path, tmp_path: Path) -> None:
    # D11: a fetch can exit 0 and leave origin/main where it was; the remote's answer says so.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    _sh(f"git -C {clone} config remote.origin.fetch +refs/heads/main:refs/remotes/origin/elsewhere")
    _sh(f"cd {origin} && {_ADVANCE}")
    out = parse_sync(_sh(sync_command(str(clone), origin=str(origin))).stdout)
    assert out.state is SyncState.FAILED and "stale" in out.detail


def _written(clone: Path) -> list[tuple[int, int]]:
    """HEAD's and the index's identity: git writes each through a lock file it renames."""
    return [((clone / ".git" / n).stat().st_ino, (clone / ".git" / n).stat().st_mtime_ns)
            for n in ("HEAD", "index")]  # fmt: skip


def test_a_sync_that_changes_nothing_writes_neither_head_nor_the_index(
    origin: Path, tmp_path: Path
) -> None:
    # A runner reads these two files' times to know whether the clone moved after it started
    # (fleet.runner.__main__.loaded_head): a sync of a clean clone at the fetched head is not a move.
    clone = tmp_path / "clone"
    cmd = sync_command(str(clone), origin=str(origin), note="run r1 of #7")
    assert parse_sync(_sh(cmd).stdout).state is SyncState.OK
    assert parse_sync(_sh(cmd).stdout).state is SyncState.OK  # the first refresh, if git wants one
    before = _written(clone)
    for _ in range(2):
        out = parse_sync(_sh(cmd).stdout)
        assert out.state is SyncState.OK
        assert _written(clone) == before
    _sh(f"cd {origin} && {_ADVANCE}")  # main moves: the clone is checked out at the new head
    out = parse_sync(_sh(cmd).stdout)
    assert out.state is SyncState.OK
    assert out.detail == _sh(f"git -C {clone} rev-parse HEAD").stdout.strip()
    assert out.detail == _sh(f"git -C {origin} rev-parse main").stdout.strip()
    assert _written(clone)[0] != before[0]


def test_a_clone_on_a_branch_or_with_an_unborn_head_is_checked_out_detached(
    origin: Path, tmp_path: Path
) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    cmd = sync_command(str(clone), origin=str(origin))
    assert _sh(f"git -C {clone} symbolic-ref -q HEAD").stdout.strip() == "refs/heads/main"
    assert parse_sync(_sh(cmd).stdout).state is SyncState.OK
    assert _sh(f"git -C {clone} symbolic-ref -q HEAD").returncode == 1  # detached now
    _sh(f"git -C {clone} symbolic-ref HEAD refs/heads/nowhere")  # HEAD names no commit
    out = parse_sync(_sh(cmd).stdout)
    assert out.state is SyncState.OK, out.detail
    assert _sh(f"git -C {clone} rev-parse HEAD").stdout.strip() == out.detail


def test_a_relative_clone_path_takes_its_lock_beside_it(origin: Path, tmp_path: Path) -> None:
    res = _sh(sync_command("clone", origin=str(origin)), cwd=tmp_path)
    assert parse_sync(res.stdout).state is SyncState.OK, res.stdout + res.stderr
    assert "not taken" not in res.stderr
    assert (tmp_path / "clone.lock").is_file() and (tmp_path / "clone" / ".git").is_dir()


def test_a_github_origin_is_compared_case_folded_and_a_foreign_one_refused(
    origin: Path, tmp_path: Path
) -> None:
    # The folded spellings (a GitHub board's) are matched after lowering what git resolves.
    accept = AcceptedOrigins(folded=("https://github.com/owner/repo",))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    env = {**os.environ, "GIT_ALLOW_PROTOCOL": "file"}  # nothing reaches the network
    for url, foreign in (
        ("https://GitHub.com/Owner/Repo", False),
        ("https://github.com/x/y", True),
    ):
        subprocess.run(["git", "-C", str(clone), "remote", "set-url", "origin", url], check=True)
        out = parse_sync(_sh(sync_command(str(clone), origin=url, accept=accept), env=env).stdout)
        if foreign:
            assert out.state is SyncState.FOREIGN_ORIGIN and out.detail == url
        else:  # past the origin check: the fetch is what fails here
            assert out.state is SyncState.FAILED and "ls-remote failed" in out.detail, out
