"""The transport's shell builders and the three-token reachability protocol (check 0, check 8).

The builders are checked by running their output in a real shell (``bash -e`` and POSIX ``sh -e``),
because what matters is what a shell does with them, not how the string looks.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.core.model import Reach
from fleet.inventory import WorkerConfig
from fleet.transport import (
    CommandTimeout,
    LocalTransport,
    RunResult,
    SSHTransport,
    Transport,
    TransportError,
    env_exports,
    parse_reach,
    path_repair,
    probe_reach,
    reach_command,
    reach_token,
    transport_for,
)
from fleet.transport import local as local_transport
from fleet.units.procs import alive

SHELLS = ["bash", "sh"]  # bash is invoke's shell; sh (dash on Debian) is a worker's plain shell


def shell(sh: str, script: str, *, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home or os.environ.get("HOME", "/root"))}
    return subprocess.run(
        [sh, "-e", "-c", script], capture_output=True, text=True, env=env, timeout=10
    )


# --- check 0: PATH repair ----------------------------------------------------------------------


@pytest.mark.parametrize("sh", SHELLS)
def test_path_repair_under_set_e_skips_missing_dirs_and_exits_zero(sh: str, tmp_path: Path) -> None:
    present = tmp_path / "has bin's"  # a space and a quote: the value must be quoted
    present.mkdir()
    missing = tmp_path / "missing"
    script = path_repair([str(missing), str(present), "~/.no-such-fleet-dir"]) + 'echo "$PATH"'
    done = shell(sh, script, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{present}:/usr/bin:/bin"


@pytest.mark.parametrize("sh", SHELLS)
def test_path_repair_keeps_prefix_order_and_expands_tilde_on_the_worker(
    sh: str, tmp_path: Path
) -> None:
    (tmp_path / ".local" / "bin").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    script = path_repair(["~/.local/bin", str(other)]) + 'echo "$PATH"'
    done = shell(sh, script, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{tmp_path}/.local/bin:{other}:/usr/bin:/bin"


@pytest.mark.parametrize("sh", SHELLS)
def test_path_repair_exports_path_to_child_processes(sh: str, tmp_path: Path) -> None:
    tool = tmp_path / "tools" / "fleet-test-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho found-me\n")
    tool.chmod(0o755)
    done = shell(sh, path_repair([str(tool.parent)]) + "sh -c fleet-test-tool")
    assert (done.returncode, done.stdout.strip()) == (0, "found-me")


def test_path_repair_of_nothing_is_empty() -> None:
    assert path_repair([]) == ""


@pytest.mark.parametrize("bad", ["relative/bin", "~other/bin", ""])
def test_path_repair_rejects_paths_that_mean_something_else_on_each_box(bad: str) -> None:
    with pytest.raises(ValueError, match="absolute"):
        path_repair([bad])


def test_env_exports_rejects_a_name_a_shell_cannot_assign() -> None:
    with pytest.raises(ValueError, match="not a valid shell name"):
        env_exports({"A-B": "x"})


# --- check 8: the three tokens -----------------------------------------------------------------


def res(stdout: str, exit: int = 0, stderr: str = "") -> RunResult:
    return RunResult(exit=exit, stdout=stdout, stderr=stderr)


@pytest.mark.parametrize("reach", [Reach.OK, Reach.NO_PERMISSION, Reach.NO_RUNNER])
@pytest.mark.parametrize(
    "layout",
    [
        "{t}\n",
        "{t}",
        "Welcome to Debian\n\nLast login: yesterday\n{t}\n",  # motd noise first
        "{t}\nthe caller's own probe output\n",
        "{t}\r\n",  # a pty turns newlines into CRLF
        "  {t}  \n",
    ],
)
def test_parse_reach_reads_every_token_through_noise(reach: Reach, layout: str) -> None:
    got, why = parse_reach(res(layout.format(t=reach_token(reach))))
    assert got is reach
    assert (why == "") is (reach is Reach.OK)


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "\n\n",
        "bash: python3: command not found\n",
        "fleet-reach:maybe\n",  # not one of the three
        "the probe prints fleet-reach:ok when it works\n",  # a mention is not a token line
        "fleet-reach:\n",
    ],
)
def test_parse_reach_without_a_token_line_is_unreachable(stdout: str) -> None:
    got, why = parse_reach(res(stdout, exit=255, stderr="ssh: connect refused\n"))
    assert got is Reach.UNREACHABLE
    assert "nothing ran" in why and "exit 255" in why and "connect refused" in why


def test_parse_reach_of_no_result_is_unreachable() -> None:
    got, why = parse_reach(None)
    assert got is Reach.UNREACHABLE and "nothing ran" in why


def test_parse_reach_first_token_wins() -> None:
    out = f"{reach_token(Reach.NO_RUNNER)}\n{reach_token(Reach.OK)}\n"
    assert parse_reach(res(out))[0] is Reach.NO_RUNNER


def test_unreachable_has_no_token() -> None:
    with pytest.raises(ValueError):
        reach_token(Reach.UNREACHABLE)


TOKEN_LINES = {reach_token(r) for r in (Reach.OK, Reach.NO_PERMISSION, Reach.NO_RUNNER)}


@given(st.text())
def test_property_any_stdout_without_a_token_line_is_unreachable(stdout: str) -> None:
    if any(line.strip() in TOKEN_LINES for line in stdout.splitlines()):
        return  # hypothesis almost never builds one; those are covered by the cases above
    assert parse_reach(res(stdout))[0] is Reach.UNREACHABLE


noise_line = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Zl", "Zp"))).filter(
    lambda s: s.strip() not in TOKEN_LINES
)


@given(
    st.lists(noise_line, max_size=5),
    st.sampled_from([Reach.OK, Reach.NO_PERMISSION, Reach.NO_RUNNER]),
    st.lists(st.text(), max_size=3),
)
def test_property_noise_before_a_token_never_changes_the_answer(
    before: list[str], reach: Reach, after: list[str]
) -> None:
    stdout = "\n".join([*before, reach_token(reach), *after])
    assert parse_reach(res(stdout))[0] is reach


# --- the reach command, run for real -----------------------------------------------------------

RUNNER_OK = "test -d /"  # a runner check that passes everywhere
RUNNER_MISSING = "python3 -c 'import fleet_no_such_runner_module'"


@pytest.mark.parametrize(
    ("make_state", "runner", "want"),
    [
        (lambda d: d / "state", RUNNER_OK, Reach.OK),
        (lambda d: d / "new" / "nested" / "state", RUNNER_OK, Reach.OK),  # created on the way
        (lambda d: d / "state", RUNNER_MISSING, Reach.NO_RUNNER),
        (lambda d: d / "state", "exit 3", Reach.NO_RUNNER),  # an exit inside cannot end the probe
        (lambda d: d / "a-file" / "state", RUNNER_OK, Reach.NO_PERMISSION),  # ENOTDIR, even root
        (lambda d: d / "a-file" / "state", RUNNER_MISSING, Reach.NO_PERMISSION),  # first wins
    ],
)
@pytest.mark.parametrize("sh", SHELLS)
def test_reach_command_always_exits_zero_with_the_token_first(
    sh: str, tmp_path: Path, make_state, runner: str, want: Reach
) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    command = reach_command(state_dir=str(make_state(tmp_path)), runner_check=runner)
    done = shell(sh, command + "echo caller-probe")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [reach_token(want), "caller-probe"]
    assert parse_reach(res(done.stdout))[0] is want


def test_reach_command_leaves_no_probe_file_behind(tmp_path: Path) -> None:
    state = tmp_path / "state"
    shell("sh", reach_command(state_dir=str(state), runner_check=RUNNER_OK))
    assert list(state.iterdir()) == []


def test_reach_command_needs_a_runner_check() -> None:
    with pytest.raises(ValueError):
        reach_command(state_dir="/tmp/x", runner_check="  ")


# --- LocalTransport ----------------------------------------------------------------------------

NASTY = 'it\'s "quoted"\nsecond line $(touch {sentinel}) `touch {sentinel}` $HOME ; | & *'


def test_local_transport_carries_a_quoted_argument_unharmed(tmp_path: Path) -> None:
    sentinel = tmp_path / "must-not-exist"
    arg = NASTY.format(sentinel=sentinel)
    got = LocalTransport("here").run(f"printf '%s' {shlex.quote(arg)}")
    assert got == RunResult(exit=0, stdout=arg, stderr="")
    assert not sentinel.exists()


def test_local_transport_reports_a_nonzero_exit_as_a_result() -> None:
    got = LocalTransport("here").run("echo out; echo err >&2; exit 7")
    assert (got.exit, got.ok, got.stdout, got.stderr) == (7, False, "out\n", "err\n")


def test_local_transport_repairs_path_and_passes_env(tmp_path: Path) -> None:
    t = LocalTransport("here", path_prefix=[str(tmp_path), "/no/such/dir"], env={"BASE": "b"})
    got = t.run('echo "$PATH"; echo "$BASE/$EXTRA"', env={"EXTRA": "two words"})
    path, vars_ = got.stdout.splitlines()
    assert path.startswith(f"{tmp_path}:") and "/no/such/dir" not in path
    assert vars_ == "b/two words"


def test_local_transport_does_not_read_our_stdin() -> None:
    assert LocalTransport("here").run("cat; echo done").stdout == "done\n"


def test_local_transport_timeout_is_its_own_error_with_partial_output() -> None:
    with pytest.raises(CommandTimeout) as caught:
        LocalTransport("here").run("echo started; sleep 5", timeout=0.3)
    assert isinstance(caught.value, TransportError)
    assert caught.value.partial is not None and "started" in caught.value.partial.stdout


def test_local_transport_timeout_ends_what_the_command_started_too() -> None:
    """A child the command left running (a hung git, a lock holder) dies with it on the timeout,
    and the run still returns at its deadline, not when the child would have ended."""
    with pytest.raises(CommandTimeout) as caught:
        LocalTransport("here").run("sleep 30 & echo $!; wait", timeout=0.5)
    assert caught.value.partial is not None
    child = int(caught.value.partial.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(child):
        time.sleep(0.02)
    assert not alive(child)


def test_local_transport_timeout_returns_although_an_escaped_child_holds_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that left the command's group (setsid) keeps the pipe open; the timeout still
    returns within the close wait, not when that child ends."""
    monkeypatch.setattr(local_transport, "STREAM_CLOSE_WAIT_S", 0.5)
    pid_file = tmp_path / "escaped.pid"
    began = time.monotonic()
    with pytest.raises(CommandTimeout):
        LocalTransport("here").run(f"setsid sleep 30 & echo $! > {pid_file}; wait", timeout=0.5)
    assert time.monotonic() - began < 0.5 + 0.5 + 3
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the escaped child is ours to end


def test_probe_reach_through_the_local_transport(tmp_path: Path) -> None:
    t = LocalTransport("here")
    assert probe_reach(t, state_dir=str(tmp_path), runner_check=RUNNER_OK) == (Reach.OK, "")
    assert probe_reach(t, state_dir=str(tmp_path), runner_check="false")[0] is Reach.NO_RUNNER


def test_local_stream_reads_lines_and_ends(tmp_path: Path) -> None:
    stream = LocalTransport("here").open_stream("echo one; echo two >&2; read x; echo got-$x")
    assert stream.read_line(5) == "one"
    assert stream.read_line(5) == "two"
    with pytest.raises(TimeoutError):
        stream.read_line(0.05)  # it waits for stdin
    stream.close()  # EOF on stdin: read ends, the script finishes
    assert stream.exit_status(5) == 0


# --- transport_for -----------------------------------------------------------------------------


def worker(name: str, transport: str, **over: object) -> WorkerConfig:
    """A real inventory worker, so a renamed field breaks this test rather than production."""
    fields: dict[str, object] = {
        "name": name,
        "transport": transport,
        "host": None,
        "port": 22,
        "master": "fleet",
        "lane": "default",
        "clone": "/srv/clone",
        "runner_clone": None,
        "runner_remote": None,
        "path_prefix": (),
        "agent": "demo",
        "supervisor": "auto",
        "key": None,
        "known_hosts": None,
        "state_dir": "/srv/state",
        "python": "python3",
        "max_run_s": 3600,
    }
    fields.update(over)
    return WorkerConfig(**fields)


def test_transport_for_picks_the_carrier() -> None:
    local = transport_for(worker("w0", "local", path_prefix=("/opt/bin",)))
    assert isinstance(local, LocalTransport) and isinstance(local, Transport)
    assert local.path_prefix == ("/opt/bin",)
    remote = transport_for(
        worker("w1", "ssh", host="10.0.0.5", port=2222, master="ann", known_hosts="/k")
    )
    assert isinstance(remote, SSHTransport) and isinstance(remote, Transport)
    assert (remote.host, remote.port, remote.user, remote.known_hosts) == (
        "10.0.0.5",
        2222,
        "ann",
        "/k",
    )


def test_transport_for_rejects_an_unknown_carrier_and_a_hostless_ssh_worker() -> None:
    with pytest.raises(ValueError, match="unknown transport"):
        transport_for(worker("w2", "telnet"))
    with pytest.raises(ValueError, match="needs a host"):
        transport_for(worker("w3", "ssh"))
    with pytest.raises(ValueError, match="needs a master"):
        transport_for(worker("w4", "ssh", host="h", master=None))
