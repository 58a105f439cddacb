"""fleet-status --watch's loop: a failed read is shown in place and the watch goes on."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from fleet.cmd import watch as w


def test_a_read_that_fails_is_a_frame_and_the_next_read_redraws(monkeypatch):
    monkeypatch.setattr(w.time, "sleep", lambda s: None)
    reads = iter([RuntimeError("board unreadable: gone"), "heartbeat: 3s ago"])

    def read() -> str:
        got = next(reads)
        if isinstance(got, Exception):
            raise got
        return got

    out = io.StringIO()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert w.watch(read, 0.2, out=out, tty=False, count=2, clock=lambda: now) == 2
    text = out.getvalue()
    assert "could not be read: RuntimeError: board unreadable: gone" in text
    assert "heartbeat: 3s ago" in text
    assert text.count("every 1s (Ctrl-C stops)") == 2  # --every is bounded below: each is a read


def test_on_a_terminal_frames_are_redrawn_with_cursor_control(monkeypatch):
    monkeypatch.setattr(w.time, "sleep", lambda s: None)
    out = io.StringIO()
    w.watch(lambda: "items:", 5, out=out, tty=True, count=3)
    assert "\x1b[" in out.getvalue() and out.getvalue().count("items:") >= 1
