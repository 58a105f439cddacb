"""Headless Chromium (Debian's ``chromium`` package): the timeline page as a PNG, the same picture.

The picture is the page's own SVG, drawn by the browser a person would open it in; no second
renderer exists that could draw something else. Chromium runs with a throwaway profile directory
and a bounded time, and as root it needs ``--no-sandbox`` (its sandbox refuses to start as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fleet.units.procs import group_runs

NAMES = ("chromium", "chromium-browser")
DEBIAN_PACKAGE = "chromium"
# A 2,000-run page's PNG took 3.2 s on a 2-core box at load 4.9 (bench/timeline_bench.py); a cold
# first start there ~8 s. 90 s is ten of the worst seen: a wedged browser, not a slow one.
SHOT_TIMEOUT_S = 90.0
MAX_SIDE_PX = 16000  # Chromium's largest surface; a wider page is shot at this size (it scrolls)
# After the browser exits, how long its helpers may take to die, and how often the profile's
# removal is tried again: a killed process's last writes land within milliseconds.
HELPERS_GONE_S = 5.0
REMOVE_TRIES = 20
REMOVE_PAUSE_S = 0.05


class BrowserError(RuntimeError):
    """No Chromium, or it did not write the picture; the message says which."""


class NoBrowser(BrowserError):
    pass


def find() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def base_args(binary: str, profile: str) -> list[str]:
    args = [binary, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    args += [
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={profile}",
    ]
    if os.geteuid() == 0:
        args.append("--no-sandbox")
    return args


def end_group(pid: int) -> None:
    """End what is left of a browser started in its own session (``start_new_session``): Chromium's
    helpers (the crash handler, the zygote) can outlive its main process and go on writing into the
    profile. Waits, bounded, until none of the group still runs (a killed helper that only waits
    for init to reap it writes nothing)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + HELPERS_GONE_S
    while time.monotonic() < deadline and group_runs(pid):
        time.sleep(REMOVE_PAUSE_S)


def remove_profile(path: str) -> None:
    """Remove a browser's profile directory, trying again while a helper's last write lands."""
    for attempt in range(REMOVE_TRIES):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == REMOVE_TRIES - 1:
                raise
            time.sleep(REMOVE_PAUSE_S)


@contextmanager
def profile() -> Iterator[str]:
    """A throwaway profile directory, removed after the browser that used it (see remove_profile)."""
    path = tempfile.mkdtemp(prefix="fleet-chromium-")
    try:
        yield path
    finally:
        remove_profile(path)


def screenshot(page: Path, png: Path, width: int, height: int) -> Path:
    """Draw ``page`` (a file) into ``png`` at ``width`` x ``height`` CSS pixels."""
    binary = find()
    if binary is None:
        raise NoBrowser(
            f"no headless Chromium found ({' or '.join(NAMES)} on PATH): "
            f"apt-get install -y {DEBIAN_PACKAGE}"
        )
    w, h = min(width, MAX_SIDE_PX), min(height, MAX_SIDE_PX)
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    with profile() as data_dir:
        args = base_args(binary, data_dir)
        args += [f"--window-size={w},{h}", f"--screenshot={png.resolve()}"]
        args.append(page.resolve().as_uri())
        started = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group, so that end_group() reaches every helper
        )
        try:
            _, stderr = started.communicate(timeout=SHOT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            end_group(started.pid)
            started.communicate()
            raise BrowserError(f"chromium did not finish within {SHOT_TIMEOUT_S:.0f} s") from None
        end_group(started.pid)
    if not png.exists() or png.stat().st_size == 0:
        tail = "\n".join((stderr or "").strip().splitlines()[-5:])
        raise BrowserError(f"chromium exited {started.returncode} and wrote no picture: {tail}")
    return png


def ensure(progress: Callable[[str], None] = print) -> str:
    """Chromium's path, installing Debian's package first when it is missing (``invoke test``)."""
    found = find()
    if found:
        return found
    progress(
        f"chromium is missing: installing it from Debian (apt-get install -y {DEBIAN_PACKAGE})"
    )
    subprocess.run(["apt-get", "install", "-y", "-qq", DEBIAN_PACKAGE], check=True, timeout=1200)
    found = find()
    if found is None:
        raise NoBrowser("apt-get installed chromium but no chromium is on PATH")
    return found
