"""Progress on long work: redrawn in place on a terminal, plain lines (one per change) elsewhere."""

from __future__ import annotations

import io

from fleet.cmd import tasks_harness
from fleet.views.progress import Meter


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_are_written_once_per_change_with_done_of_total():
    out = io.StringIO()
    with Meter("demo: drain", total=15, out=out) as m:
        m.update(3, "sweep 1")
        m.update(3, "sweep 1")  # a poll that changed nothing writes nothing
        m.update(7, "sweep 2")
        m.line("demo: sweep 2: launched #4→local")
    lines = out.getvalue().splitlines()
    assert [ln.split(" [")[0] for ln in lines[:2]] == ["demo: drain: 3/15", "demo: drain: 7/15"]
    assert lines[0].endswith("sweep 1") and lines[2] == "demo: sweep 2: launched #4→local"
    assert "\x1b[" not in out.getvalue()


def test_on_a_terminal_it_redraws_with_a_bar():
    out = Tty()
    with Meter("demo: drain", total=15, out=out) as m:
        m.update(8, "sweep 9: idle")
    text = out.getvalue()
    assert "\x1b[" in text and "8/15" in text and "sweep 9: idle" in text


def test_the_image_build_keeps_its_steps_and_folds_the_streamed_output(monkeypatch):
    out = Tty()
    monkeypatch.setattr(tasks_harness.sys, "stdout", out)
    with tasks_harness._build_progress() as progress:
        progress("building fleet-worker:abc from the mirror")
        for n in range(50):
            progress(f"  Get:{n} some package")
    text = out.getvalue()
    assert text.count("building fleet-worker:abc") >= 1
    assert text.count("\n") < 50  # fifty streamed lines did not scroll fifty lines


def test_the_image_build_into_a_pipe_prints_every_line(monkeypatch, capsys):
    monkeypatch.setattr(tasks_harness.sys.stdout, "isatty", lambda: False, raising=False)
    with tasks_harness._build_progress() as progress:
        progress("a step")
        progress("  a streamed line")
    assert capsys.readouterr().out.splitlines() == ["a step", "  a streamed line"]
