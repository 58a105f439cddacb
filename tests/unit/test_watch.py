"""fleet-status --watch's loop: a failed read is shown in place and the watch goes on."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from fleet.cmd import watch as w


class NoWait(w.Interrupt):
    """The wait between frames returns at once: the tests draw frames, not seconds."""

    def wait(self, seconds: float) -> bool:
        return self.requested.is_set()


def test_a_read_that_fails_is_a_frame_and_the_next_read_redraws():
    reads = iter([RuntimeError("board unreadable: gone"), "heartbeat: 3s ago"])

    def read() -> str:
        got = next(reads)
        if isinstance(got, Exception):
            raise got
        return got

    out = io.StringIO()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert (
        w.watch(read, 0.2, out=out, tty=False, count=2, clock=lambda: now, interrupt=NoWait()) == 2
    )
    text = out.getvalue()
    assert "could not be read: RuntimeError: board unreadable: gone" in text
    assert "heartbeat: 3s ago" in text
    assert text.count("every 1s (Ctrl-C stops)") == 2  # --every is bounded below: each is a read


def test_on_a_terminal_frames_are_redrawn_with_cursor_control():
    out = io.StringIO()
    w.watch(lambda: "items:", 5, out=out, tty=True, count=3, interrupt=NoWait())
    assert "\x1b[" in out.getvalue() and out.getvalue().count("items:") >= 1


def test_ctrl_c_during_a_read_lets_the_read_finish_and_ends_the_watch():
    """The first SIGINT is a request: the frame being read is completed and drawn, no next frame
    is read, and the wait between frames does not run out its seconds."""
    import os
    import signal
    import time

    reads: list[str] = []

    def read() -> str:
        reads.append("started")
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives in the middle of the read
        time.sleep(0.05)
        reads.append("finished")
        return "items:"

    out = io.StringIO()
    before = signal.getsignal(signal.SIGINT)  # a runner of the suite may have set it (SIG_IGN)
    began = time.monotonic()
    drawn = w.watch(read, 30, out=out, tty=False)
    assert drawn == 1 and reads == ["started", "finished"]
    assert "items:" in out.getvalue()
    assert time.monotonic() - began < 10  # not the 30 s wait
    assert signal.getsignal(signal.SIGINT) == before  # put back as it was
