"""The switch files (halt file, SwitchName.PAUSE, SwitchName.DRAIN): a file that exists is on, whatever it holds; a switch
without a reason says so on every line; its age is its mtime (seed 003, "Two kill switches")."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.cmd.control import describe
from fleet.control.switches import (
    SwitchName,
    operator,
    read_halt_file,
    read_switch,
    remove_switch,
    write_switch,
)
from fleet.core.select import halt_line


def _aged(path: Path, minutes: int) -> datetime:
    then = datetime.now(UTC) - timedelta(minutes=minutes)
    os.utime(path, (then.timestamp(), then.timestamp()))
    return then


@pytest.mark.parametrize("text", ["", "\n\n", "author: ops\n", "reason:\nauthor: ops\n"])
def test_an_empty_or_reasonless_halt_file_halts_and_says_no_reason(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "HALT"
    path.write_text(text)
    then = _aged(path, 7)
    h = read_halt_file(path)
    assert h is not None and h.reason is None
    line = halt_line(h, then + timedelta(minutes=7))
    assert line.endswith(": no reason was recorded") and "set 7m ago" in line


def test_loose_text_in_a_halt_file_is_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "HALT"
    path.write_text("forge is migrating\nback at 3pm\n")
    h = read_halt_file(path)
    assert h is not None and h.reason == "forge is migrating back at 3pm"


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1).filter(lambda s: s.split()), st.text(alphabet="abcxyz@.-", min_size=1))
def test_a_written_switch_reads_back(reason: str, author: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "PAUSE"
        written = write_switch(SwitchName.PAUSE, path, reason, author)
        read = read_switch(SwitchName.PAUSE, path)
    assert read == written
    assert read.reason == " ".join(reason.split())  # one line: a reason never spans the file
    assert read.author == author and read.since is not None


def test_remove_says_whether_it_was_on(tmp_path: Path) -> None:
    path = tmp_path / "DRAIN"
    assert read_switch(SwitchName.DRAIN, path) is None
    write_switch(SwitchName.DRAIN, path, "release day", "ops")
    assert remove_switch(path) is True
    assert remove_switch(path) is False and read_switch(SwitchName.DRAIN, path) is None


def test_the_author_defaults_to_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("USER", "carol")
    assert operator() == "carol" and operator("dave") == "dave"


def test_describe_prints_reason_author_and_age(tmp_path: Path) -> None:
    path = tmp_path / "PAUSE"
    s = write_switch(SwitchName.PAUSE, path, "", "ops")
    assert s.since is not None
    line = describe(s, s.since + timedelta(minutes=3))
    assert line == f"PAUSE {path} set by ops, 3m ago: no reason was recorded"
