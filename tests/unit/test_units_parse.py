"""Pure parts of the supervisor: names, command builders, and parsers of captured output (D3, D4).

The systemd strings below have the shape ``systemctl --user show`` and ``systemd-run`` print
(docs/facts.md); the collision cases carry the *same* stderr on
purpose — check 10 must tell them apart by the unit's state, never by the error string.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import fleet.units
from fleet.transport import LocalTransport, RunResult
from fleet.units import (
    ClaimCode,
    SupervisorError,
    UnitsParseError,
    issue_of,
    portable,
    supervise,
    systemd,
    unit_name,
)
from fleet.units.__main__ import build_parser
from fleet.units.base import UnitStart, check_start_args

ENV = {"PATH": "/home/me/.local/bin:/usr/bin"}
COLLISION = (
    "Failed to start transient service unit: "
    "Unit task-42.service was already loaded or has a fragment file.\n"
)


def show(state: str, load: str = "loaded", start_us: int = 123456789, issue: int = 42) -> str:
    stamp = "Sun 2026-11-29 15:00:00 UTC" if start_us else ""
    return (
        f"Id=task-{issue}.service\nLoadState={load}\nActiveState={state}\nSubState=running\n"
        f"Result=success\nExecMainPID=4242\nExecMainStartTimestamp={stamp}\n"
        f"ExecMainStartTimestampMonotonic={start_us}\nExecMainExitTimestampMonotonic=0\n"
    )


def started(rc: int, block: str, issue: int = 42, said: str = "") -> str:
    return (
        f"{systemd.MARK} begin_{issue} rc=0\n{said}\n{systemd.MARK} start_{issue} rc={rc}\n{block}"
    )


# -- names ---------------------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=10**9))
def test_unit_name_round_trips_and_carries_no_entropy(issue: int) -> None:
    assert unit_name(issue) == unit_name(issue) == f"task-{issue}"
    assert issue_of(unit_name(issue)) == issue
    assert issue_of(unit_name(issue) + ".service") == issue


@pytest.mark.parametrize("bad", [0, -3, True, "7", 7.0, None])
def test_unit_name_refuses_what_is_not_an_issue_number(bad: object) -> None:
    with pytest.raises(ValueError, match="positive int"):
        unit_name(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["task-0", "task-", "task-42-1700000000-ab12", "task-42.scope", "xtask-4", "task-٣"]
)
def test_issue_of_rejects_names_that_are_not_ours(name: str) -> None:
    assert issue_of(name) is None


@pytest.mark.parametrize(
    ("argv", "env", "max_run_s", "message"),
    [
        ([], ENV, 60, "non-empty"),
        ("agent", ENV, 60, "non-empty"),
        (["agent"], {}, 60, "PATH"),
        (["agent"], {"PATH": ""}, 60, "PATH"),
        (["agent"], {**ENV, "BAD KEY": "x"}, 60, "valid variable"),
        (["agent"], {**ENV, "K": "a\0b"}, 60, "NUL"),
        (["agent"], ENV, 0, "max_run_s"),
        (["agent"], ENV, True, "max_run_s"),
    ],
)
def test_start_arguments_are_refused_with_a_clear_error(
    argv: object, env: dict[str, str], max_run_s: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_start_args(argv, env, max_run_s)  # type: ignore[arg-type]


# -- portable: builders agree with the worker's CLI ----------------------------------------------

shell_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"))


@given(
    argv=st.lists(shell_text, min_size=1, max_size=5),
    values=st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), shell_text),
    cwd=st.one_of(st.none(), shell_text.filter(bool)),
)
def test_portable_start_command_reaches_the_worker_cli_intact(
    argv: list[str], values: dict[str, str], cwd: str | None
) -> None:
    env = {**values, "PATH": "/usr/bin"}
    command = portable.build_start_command(
        python="python3",
        state_dir="~/units dir",
        issue=7,
        argv=argv,
        env=env,
        max_run_s=90,
        cwd=cwd,
    )
    words = shlex.split(command)
    assert words[:3] == ["python3", "-m", "fleet.units"]
    args = build_parser().parse_args(words[3:])
    assert (args.command, args.dir, args.issue, args.max_run_s) == ("start", "~/units dir", 7, 90)
    assert args.argv == argv
    assert dict(item.split("=", 1) for item in args.setenv) == env
    assert args.cwd == cwd


def test_portable_probe_and_stop_commands_parse_on_the_worker() -> None:
    probe = build_parser().parse_args(
        shlex.split(portable.build_probe_command(python="py", state_dir="/s d"))[3:]
    )
    stop = build_parser().parse_args(
        shlex.split(portable.build_stop_command(python="py", state_dir="/s", issue=5, timeout_s=2))[
            3:
        ]
    )
    assert (probe.command, probe.dir) == ("probe", "/s d")
    assert (stop.command, stop.issue, stop.timeout_s) == ("stop", 5, 2.0)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--dir", "/s"],
        ["--dir", "/s", "--handshake-fd", "three"],
        ["--dir", "/s", "--fd", "3"],
        ["--dir", "/s", "--handshake-fd", "3", "--dir"],
    ],
)
def test_the_supervising_process_refuses_any_other_command_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Its one caller passes exactly --dir and --handshake-fd; anything else is a usage error,
    before it reads a spec or touches a lock (start then reads the missing handshake as 43)."""
    assert supervise.main(argv) == 2
    assert "usage: python -m fleet.units.supervise" in capsys.readouterr().err


def test_fleet_units_loads_each_backend_on_first_use_and_knows_no_other_name() -> None:
    """The package is the worker side's entry too: importing it must not load the backends."""
    code = (
        "import sys, fleet.units as u; before = 'fleet.units.systemd' in sys.modules; "
        "u.SystemdSupervisor; print(before, 'fleet.units.systemd' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["False", "True"], out.stderr
    name = "SystemdSupervisr"
    with pytest.raises(AttributeError, match="has no attribute 'SystemdSupervisr'"):
        getattr(fleet.units, name)


# -- portable: parsers ---------------------------------------------------------------------------

RECORD = {
    "issue": 7,
    "state": "active",
    "start_us": 5_000_000,
    "started_at": "2026-11-29T15:00:00.000001+00:00",
    "pid": 10,
    "supervisor_pid": 9,
}


def answer(code: str, unit: object = RECORD, exit: int | None = None) -> RunResult:
    payload = json.dumps({"code": code, "unit": unit, "detail": f"d-{code}"})
    return RunResult(portable.START_EXITS[code] if exit is None else exit, "motd\n" + payload, "")


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("launched", ClaimCode.LAUNCHED),
        ("held-live", ClaimCode.HELD_LIVE),
        ("held-finished", ClaimCode.HELD_FINISHED),
        ("failed", ClaimCode.SUPERVISOR_FAILED),
    ],
)
def test_portable_start_answer_maps_to_its_claim_code(code: str, expected: ClaimCode) -> None:
    claim = portable.parse_start(answer(code), issue=7, worker="w1", master="m")
    assert claim.code is expected
    if expected is ClaimCode.SUPERVISOR_FAILED:
        assert claim.unit is None
    else:
        assert claim.unit is not None
        assert (claim.unit.issue, claim.unit.worker, claim.unit.master) == (7, "w1", "m")
        assert claim.unit.start_us == 5_000_000
        assert claim.unit.started_at == datetime(2026, 11, 29, 15, 0, 0, 1, tzinfo=UTC)


def test_portable_start_answer_whose_exit_disagrees_is_a_supervisor_failure() -> None:
    claim = portable.parse_start(answer("launched", exit=5), issue=7, worker="w", master="m")
    assert claim.code is ClaimCode.SUPERVISOR_FAILED and "inconsistent" in claim.detail


def test_portable_start_without_an_answer_reports_stderr() -> None:
    result = RunResult(1, "", "/usr/bin/python3: No module named fleet\n")
    claim = portable.parse_start(result, issue=7, worker="w", master="m")
    assert claim.code is ClaimCode.SUPERVISOR_FAILED and "No module named fleet" in claim.detail


def test_portable_held_answer_with_an_unreadable_record_still_says_held() -> None:
    claim = portable.parse_start(answer("held-live", unit="?"), issue=7, worker="w", master="m")
    assert claim.code is ClaimCode.HELD_LIVE and claim.unit is not None
    assert claim.unit.issue == 7


def test_portable_probe_parses_units_and_refuses_to_guess() -> None:
    ok = RunResult(0, json.dumps({"units": [{**RECORD, "issue": 9}, RECORD]}), "")
    assert [u.issue for u in portable.parse_probe(ok, worker="w", master="m")] == [7, 9]
    assert portable.parse_probe(RunResult(0, '{"units": []}', ""), worker="w", master="m") == ()
    for broken in (
        RunResult(1, '{"error": "cannot list /x: Permission denied"}', ""),
        RunResult(127, "", "python3: not found"),
        RunResult(0, '{"units": [{"issue": "x"}]}', ""),
        RunResult(0, '{"units": 3}', ""),
    ):
        with pytest.raises(SupervisorError):
            portable.parse_probe(broken, worker="w", master="m")


@given(st.text(), st.integers(-1, 255))
def test_portable_parsers_never_crash_on_garbage(stdout: str, exit: int) -> None:
    result = RunResult(exit, stdout, "")
    assert portable.parse_start(result, issue=7, worker="w", master="m").code in ClaimCode
    try:
        portable.parse_probe(result, worker="w", master="m")
        portable.parse_stop(result, worker="w")
    except SupervisorError:
        pass


@given(st.dictionaries(st.sampled_from(list(RECORD)), st.none() | st.integers() | st.text()))
def test_portable_records_of_any_shape_parse_or_are_refused(record: dict) -> None:
    stdout = json.dumps({"code": "launched", "unit": record})
    claim = portable.parse_start(RunResult(0, stdout, ""), issue=7, worker="w", master="m")
    assert claim.code is ClaimCode.LAUNCHED and claim.unit is not None
    try:
        units = portable.parse_probe(
            RunResult(0, json.dumps({"units": [record]}), ""), worker="w", master="m"
        )
    except SupervisorError:
        return
    assert all(u.issue > 0 and u.start_us >= 0 for u in units)


# -- systemd: builders ---------------------------------------------------------------------------


def test_systemd_start_command_is_the_d3_invocation_then_a_state_read() -> None:
    command = systemd.build_start_command(
        issue=42,
        argv=["agent", "it's", "--flag"],
        env={"PATH": "/a b:/usr/bin", "FLEET_RUN": "r1"},
        max_run_s=3600,
        cwd="/work tree",
        notifier=systemd.NOTIFIER_TEMPLATE,
    )
    function, call = command.split("\n")
    assert shlex.split(call) == [
        "fleet_claim", "42",
        "--user", "--quiet", "--unit=task-42", "--collect", "-p", "Type=exec",
        "-p", "RuntimeMaxSec=3600", "-p", "OnFailure=fleet-notify@task-42.service",
        "--setenv=PATH=/a b:/usr/bin", "--setenv=FLEET_RUN=r1",
        "--working-directory=/work tree", "--", "agent", "it's", "--flag",
    ]  # fmt: skip
    assert function.startswith("fleet_claim() {") and 'systemd-run "$@"' in function
    assert 'systemctl --user show "task-$n.service"' in function and "ActiveState" in function


# Stand-ins for the two systemd commands the claim function calls, to drive its shell branches on
# this box (systemd itself answers in tests/docker/test_supervisor_contract.py): systemd-run logs
# each call and answers with $ANSWER's words and exit 1 for its first $REFUSALS calls, then 0;
# systemctl says the unit is gone.
SYSTEMD_RUN_STUB = """#!/bin/sh
echo call >> "$CALLS"
if [ "$(wc -l < "$CALLS")" -le "$REFUSALS" ]; then printf '%s\\n' "$ANSWER"; exit 1; fi
exit 0
"""
SYSTEMCTL_STUB = """#!/bin/sh
case "$*" in *"-p LoadState --value"*) echo not-found;; *) printf 'Id=x\\nLoadState=not-found\\n';; esac
"""


@pytest.mark.parametrize(
    ("answer", "refusals", "calls", "rc"),
    [
        (COLLISION, 1, 2, 0),  # the name refused in the instant of its collection: once more
        (COLLISION, 2, 2, 1),  # refused again: a refusal, tried twice and no more
        ("Failed to start transient service unit: Unit task-42.service already exists.", 1, 2, 0),
        # the command could not be executed: its unit is collected too, but a second try would run
        # the failed exec and its OnFailure alarm again
        (
            'Job for task-42.service failed.\nSee "systemctl --user status task-42.service".',
            1,
            1,
            1,
        ),
        ("words this code does not know", 1, 1, 1),
    ],
)
def test_a_refused_claim_is_tried_again_only_when_systemd_says_the_name_was_taken(
    tmp_path, answer: str, refusals: int, calls: int, rc: int
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("systemd-run", SYSTEMD_RUN_STUB), ("systemctl", SYSTEMCTL_STUB)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls"
    log.touch()
    start = UnitStart(42, ("agent",), ENV, 60)
    ((command, _),) = systemd.build_starts_commands([start])
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "CALLS": str(log), "ANSWER": answer,
           "REFUSALS": str(refusals)}  # fmt: skip
    out = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=30)
    assert len(log.read_text().splitlines()) == calls
    assert f"start_42 rc={rc}" in out.stdout


def test_systemd_claims_of_one_master_share_commands_that_fit_one_argument() -> None:
    starts = [UnitStart(n, ("agent", "x" * 2000), {"PATH": "/usr/bin"}, 60) for n in range(1, 120)]
    commands = systemd.build_starts_commands(starts)
    assert len(commands) > 1  # ~2 KiB a claim: 119 claims do not fit one command
    assert [s for _, chunk in commands for s in chunk] == starts  # every claim, once, in order
    for command, chunk in commands:
        assert len(command.encode()) <= systemd.MAX_COMMAND_BYTES
        calls = [shlex.split(line)[1] for line in command.split("\n")[1:]]
        assert calls == [str(s.issue) for s in chunk]


def test_systemd_claim_commands_fit_the_kernels_limit_in_bytes_not_characters() -> None:
    """MAX_ARG_STRLEN counts bytes: a path in CJK is three bytes a character."""
    starts = [UnitStart(n, ("agent", "工作" * 700), {"PATH": "/usr/bin"}, 60) for n in range(1, 60)]
    commands = systemd.build_starts_commands(starts)
    assert [s for _, chunk in commands for s in chunk] == starts
    assert all(len(command.encode()) <= systemd.MAX_COMMAND_BYTES for command, _ in commands)


def test_a_batch_whose_later_command_cannot_run_keeps_the_answers_it_had(tmp_path) -> None:
    """The first command launches its claims; the next cannot even be started (an argument over
    the kernel's limit: E2BIG); the one after is never sent. Launched stays launched, the failed
    command's claims are unknown (None: they may have begun), the unsent ones were not tried."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemd-run").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "systemd-run").chmod(0o755)
    sup = systemd.SystemdSupervisor(
        LocalTransport("here", path_prefix=[str(bin_dir)]), worker="here", master="me"
    )
    small = [UnitStart(n, ("agent",), ENV, 60) for n in (1, 2)]
    huge = UnitStart(3, ("agent", "x" * 200_000), ENV, 60)  # its own command, past MAX_ARG_STRLEN
    last = UnitStart(4, ("agent",), ENV, 60)
    claims = sup.start_many([*small, huge, last])
    assert [c.code if c else None for c in claims] == [
        ClaimCode.LAUNCHED, ClaimCode.LAUNCHED, None, ClaimCode.SUPERVISOR_FAILED,
    ]  # fmt: skip
    assert claims[3] is not None and "not tried" in claims[3].detail


@pytest.mark.parametrize(
    "command",
    [
        systemd.build_start_command(issue=1, argv=["a"], env=ENV, max_run_s=5),
        systemd.build_starts_commands([UnitStart(n, ("a",), ENV, 5) for n in (1, 2)])[0][0],
        systemd.build_probe_command(),
        systemd.build_stop_command(3, 2.5),
        systemd.notifier_install_command("/usr/bin/python3"),
    ],
)
def test_systemd_commands_are_valid_shell(command: str) -> None:
    assert subprocess.run(["bash", "-n", "-c", command], capture_output=True).returncode == 0


def test_notifier_always_exits_zero_and_refuses_an_unquotable_python() -> None:
    text = systemd.notifier_unit_text("/usr/bin/python3")
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line.startswith("ExecStart=-")  # any exit status counts as success
    assert exec_line.endswith("|| true'") and "notify %i" in exec_line
    with pytest.raises(ValueError, match="plain path"):
        systemd.notifier_unit_text("/opt/my python/bin/python3")


# -- systemd: parsers of captured output ---------------------------------------------------------


def test_systemd_launch_is_read_from_the_exit_code_alone() -> None:
    result = RunResult(0, started(0, ""), "")
    claim = systemd.parse_start(result, issue=42, worker="w", master="m")
    assert claim.code is ClaimCode.LAUNCHED and claim.unit is not None
    assert (claim.unit.issue, claim.unit.worker, claim.unit.master) == (42, "w", "m")
    assert claim.unit.start_us == 0  # unknown here: the probe reads the start (D4's order)


def test_systemd_each_claim_of_a_batch_answers_for_itself() -> None:
    starts = [UnitStart(n, ("a",), ENV, 5) for n in (1, 2, 3, 4, 5)]
    stdout = (
        started(0, "", issue=1)
        + started(1, show("active", issue=2), issue=2, said=COLLISION)
        + started(1, show("failed", issue=3), issue=3)
        + started(1, "", issue=4, said="Failed to connect to bus: No medium found")
        + f"{systemd.MARK} begin_5 rc=0\n"  # systemd-run began; the answer never came
    )
    claims = systemd.parse_starts(RunResult(0, stdout, ""), starts, worker="w", master="m")
    assert [c.code if c else None for c in claims] == [
        ClaimCode.LAUNCHED,
        ClaimCode.HELD_LIVE,
        ClaimCode.HELD_FINISHED,
        ClaimCode.SUPERVISOR_FAILED,
        None,  # may be live: unconfirmed, never a guess
    ]
    assert claims[3] is not None and "No medium found" in claims[3].detail


def test_systemd_a_claim_never_begun_is_a_failure_unless_the_command_was_cut_short() -> None:
    starts = [UnitStart(n, ("a",), ENV, 5) for n in (1, 2)]
    stdout = started(0, "", issue=1)
    whole = systemd.parse_starts(RunResult(1, stdout, "sh: killed"), starts, worker="w", master="m")
    assert whole[0] is not None and whole[0].code is ClaimCode.LAUNCHED
    assert whole[1] is not None and whole[1].code is ClaimCode.SUPERVISOR_FAILED
    cut = systemd.parse_starts(
        RunResult(-1, stdout, ""), starts, worker="w", master="m", whole=False
    )
    assert cut[0] is not None and cut[0].code is ClaimCode.LAUNCHED
    assert cut[1] is None  # a timed-out command may still be running it on the worker


@pytest.mark.parametrize(
    ("state", "load", "expected"),
    [
        ("active", "loaded", ClaimCode.HELD_LIVE),
        ("activating", "loaded", ClaimCode.HELD_LIVE),
        ("reloading", "loaded", ClaimCode.HELD_LIVE),
        ("deactivating", "loaded", ClaimCode.HELD_FINISHED),
        ("failed", "loaded", ClaimCode.HELD_FINISHED),
        ("inactive", "loaded", ClaimCode.HELD_FINISHED),
        ("inactive", "not-found", ClaimCode.SUPERVISOR_FAILED),
        ("active", "masked", ClaimCode.SUPERVISOR_FAILED),
        ("", "", ClaimCode.SUPERVISOR_FAILED),
    ],
)
def test_systemd_collision_is_classified_by_state_not_by_message(
    state: str, load: str, expected: ClaimCode
) -> None:
    result = RunResult(0, started(1, show(state, load)), COLLISION)
    claim = systemd.parse_start(result, issue=42, worker="w", master="m")
    assert claim.code is expected
    assert (claim.unit is None) is (expected is ClaimCode.SUPERVISOR_FAILED)


def test_systemd_failure_without_a_bus_is_not_a_collision() -> None:
    said = "Failed to connect to bus: No medium found\n"
    result = RunResult(0, started(1, "", said=said), "")
    claim = systemd.parse_start(result, issue=42, worker="w", master="m")
    assert claim.code is ClaimCode.SUPERVISOR_FAILED and "No medium found" in claim.detail


def test_systemd_probe_lists_live_and_lingering_units() -> None:
    stdout = (
        f"{systemd.MARK} show rc=0\n"
        f"{show('active')}\n{show('failed', issue=7, start_us=99)}\n"
        f"{show('inactive', 'not-found', 0, issue=8)}"
    )
    units = systemd.parse_probe(RunResult(0, stdout, ""), worker="w", master="m")
    assert [(u.issue, u.state, u.start_us) for u in units] == [
        (7, "failed", 99),
        (42, "active", 123456789),
    ]


def test_systemd_probe_with_no_units_is_empty_and_without_a_bus_is_an_error() -> None:
    empty = RunResult(0, f"{systemd.MARK} show rc=0\n\n", "")
    assert systemd.parse_probe(empty, worker="w", master="m") == ()
    no_bus = RunResult(
        0, f"{systemd.MARK} show rc=1\nFailed to connect to bus: No medium found\n", ""
    )
    with pytest.raises(SupervisorError, match="No medium found"):
        systemd.parse_probe(no_bus, worker="w", master="m")
    with pytest.raises(SupervisorError):
        systemd.parse_probe(RunResult(255, "", "ssh: connect refused"), worker="w", master="m")


def test_systemd_stop_reports_what_it_found_and_what_it_left() -> None:
    stdout = (
        f"{systemd.MARK} before rc=0\n{show('active')}"
        f"{systemd.MARK} after rc=1\n{show('inactive', 'not-found', 0)}"
    )
    outcome = systemd.parse_stop(RunResult(0, stdout, ""), issue=42, worker="w")
    assert (outcome.was_live, outcome.stopped) == (True, True)
    assert "SIGKILL" in outcome.detail
    nothing = stdout.replace("ActiveState=active", "ActiveState=inactive").replace(
        "LoadState=loaded", "LoadState=not-found"
    )
    outcome = systemd.parse_stop(RunResult(0, nothing, ""), issue=42, worker="w")
    assert (outcome.was_live, outcome.stopped) == (False, True)


marked = st.lists(
    st.one_of(
        st.text(),
        st.builds(
            lambda section, rc: f"{systemd.MARK} {section} rc={rc}",
            st.sampled_from(["start_3", "begin_3", "show", "before", "after", "x"]),
            st.integers(-5, 300),
        ),
        st.builds(
            lambda k, v: f"{k}={v}",
            st.sampled_from(systemd.SHOW_PROPS),
            st.one_of(st.text(), st.sampled_from(["task-3.service", "loaded", "active", "12"])),
        ),
    ),
    max_size=30,
).map("\n".join)


@given(marked, st.integers(-1, 255))
def test_systemd_parsers_classify_or_refuse_never_crash(stdout: str, exit: int) -> None:
    result = RunResult(exit, stdout, "")
    assert isinstance(systemd.parse_show(stdout), list)
    assert systemd.parse_start(result, issue=3, worker="w", master="m").code in ClaimCode
    for parse in (
        lambda: systemd.parse_probe(result, worker="w", master="m"),
        lambda: systemd.parse_stop(result, issue=3, worker="w"),
    ):
        try:
            parse()
        except (SupervisorError, UnitsParseError):
            pass


@given(st.text())
def test_systemd_timestamps_parse_or_are_none(text: str) -> None:
    value = systemd.parse_timestamp(text)
    assert value is None or value.tzinfo is UTC
