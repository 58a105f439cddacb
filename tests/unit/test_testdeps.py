"""``invoke test`` installs sshd when it is missing, so a fresh clone runs the SSH transport tests
instead of skipping all 13 (fleet/cmd/testdeps.py). apt-get is the one part replaced here: it is
given as a function that does what a successful install does (the file appears)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest
from invoke import MockContext, Result

from fleet.cmd import tasks_harness, tasks_queue
from fleet.cmd.testdeps import SSH_TESTS_ENV, SSH_TOOLS, SSHD, Tool, ensure_tools
from fleet.timeline import browser


class Apt:
    """Records every apt-get call; ``install`` makes the tools' files, after ``fail_first`` fails."""

    def __init__(self, tools: Sequence[Tool], fail_first: int = 0) -> None:
        self.tools, self.fail_first, self.calls = tools, fail_first, []

    def __call__(self, args: Sequence[str]) -> int:
        self.calls.append(list(args))
        if args[0] != "install":
            return 0
        if self.fail_first:
            self.fail_first -= 1
            return 100
        for t in self.tools:
            Path(t.path).write_text("#!/bin/sh\n")
            Path(t.path).chmod(0o755)
        return 0


def test_a_missing_sshd_is_installed_with_apt_get(tmp_path: Path) -> None:
    tools = (Tool(str(tmp_path / "sshd"), "openssh-server"),)
    apt = Apt(tools)
    lines: list[str] = []
    assert ensure_tools(tools, lines.append, apt=apt, is_root=True, have_apt=True) is None
    assert apt.calls == [["install", "-y", "-qq", "openssh-server"]]
    assert "installing it from Debian" in lines[0]


def test_a_failed_install_updates_the_indexes_once_and_retries(tmp_path: Path) -> None:
    tools = (Tool(str(tmp_path / "sshd"), "openssh-server"), Tool(str(tmp_path / "kg"), "x-client"))
    apt = Apt(tools, fail_first=1)
    assert ensure_tools(tools, lambda _: None, apt=apt, is_root=True, have_apt=True) is None
    assert [c[0] for c in apt.calls] == ["install", "update", "install"]
    assert apt.calls[0][-2:] == ["openssh-server", "x-client"]


def test_without_root_or_apt_it_says_why_and_installs_nothing(tmp_path: Path) -> None:
    tools = (Tool(str(tmp_path / "sshd"), "openssh-server"),)
    apt = Apt(tools)
    why = ensure_tools(tools, lambda _: None, apt=apt, is_root=False, have_apt=True)
    assert why is not None and "not root" in why and "sudo apt-get install openssh-server" in why
    why = ensure_tools(tools, lambda _: None, apt=apt, is_root=True, have_apt=False)
    assert why is not None and "no apt-get" in why
    assert apt.calls == []


def test_present_tools_ask_apt_nothing(tmp_path: Path) -> None:
    (tmp_path / "sshd").write_text("")
    (tmp_path / "sshd").chmod(0o755)
    apt = Apt(())
    assert ensure_tools((Tool(str(tmp_path / "sshd"), "p"),), print, apt=apt) is None
    assert apt.calls == []


def test_invoke_test_hands_the_suite_its_ssh_promise(monkeypatch: pytest.MonkeyPatch) -> None:
    """``invoke test`` itself (its body, on a recording context): the pytest run gets
    FLEET_SSH_TESTS=1 when sshd is there, so the SSH tests can no longer skip silently."""
    monkeypatch.setattr(browser, "ensure", lambda _progress: None)  # the timeline's own step
    c = MockContext(run=Result(), repeat=True)
    tasks_queue.test(c, docker=False)
    pytest_runs = [call for call in c.run.call_args_list if "-m pytest" in call.args[0]]
    assert len(pytest_runs) == 1
    env = pytest_runs[0].kwargs["env"]
    assert SSH_TOOLS[0].path == SSHD and SSH_TOOLS[0].package == "openssh-server"
    if all(t.present() for t in SSH_TOOLS):
        assert env[SSH_TESTS_ENV] == "1"
    else:
        assert SSH_TESTS_ENV not in env


def test_invoke_test_checks_the_rules_before_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """ruff, the import-linter layers and mypy run from ``invoke test``, before pytest: a broken
    rule fails the suite like a failing test."""
    monkeypatch.setattr(browser, "ensure", lambda _progress: None)
    c = MockContext(run=Result(), repeat=True)
    tasks_queue.test(c, docker=False)
    commands = [call.args[0] for call in c.run.call_args_list]
    order = [
        next(i for i, cmd in enumerate(commands) if needle in cmd)
        for needle in ("-m ruff check", "lint-imports", "-m mypy", "-m pytest")
    ]
    assert order == sorted(order)


def _pytest_call(c: MockContext) -> tuple[str, dict[str, str]]:
    (call,) = [call for call in c.run.call_args_list if "-m pytest" in call.args[0]]
    return call.args[0], call.kwargs["env"]


@pytest.mark.parametrize(
    ("run", "marks", "docker"),
    [
        (lambda c: tasks_queue.test(c), tasks_queue.SUITE, True),
        (lambda c: tasks_queue.test(c, fast=True), tasks_queue.FAST, False),
        (lambda c: tasks_queue.stress(c), tasks_queue.STRESS, True),
    ],
    ids=["test", "test --fast", "stress"],
)
def test_each_tier_runs_its_marker_expression(
    monkeypatch: pytest.MonkeyPatch, run, marks: str, docker: bool
) -> None:
    """``invoke test`` leaves the long races to ``invoke stress``; ``--fast`` also leaves out the
    harness and the slow tests; ``invoke stress`` runs only the long races, on the harness."""
    monkeypatch.setattr(browser, "ensure", lambda _progress: None)
    monkeypatch.setattr(tasks_harness, "docker_tests_env", lambda: {"FLEET_DOCKER": "1"})
    c = MockContext(run=Result(), repeat=True)
    run(c)
    command, env = _pytest_call(c)
    assert f"-m {shlex.quote(marks)}" in command
    assert ("FLEET_DOCKER" in env) is docker
