"""What ``invoke test`` installs before the suite, so a fresh machine skips nothing it could run.

The SSH transport tests start a real sshd on 127.0.0.1 (tests/integration/test_transport_ssh.py).
``.ci/run`` installs openssh-server when it is missing, but the README's test command is
``pip install -e '.[test]' && invoke test``, which did not: on a fresh clone all 13 SSH tests
skipped. ``invoke test`` now installs it the way the harness installs mmdebstrap (apt-get, with its
progress shown), and tells the suite it did (``FLEET_SSH_TESTS=1``), so a missing sshd after that
fails those tests instead of skipping them. Where it cannot install (not root, no apt-get), it says
why in one line and the tests skip with the same reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SSHD = "/usr/sbin/sshd"
# Bounds an apt-get run (update or install): a stuck mirror must not hang the test command.
APT_TIMEOUT_S = 600.0
# Set by ``invoke test`` once sshd is there: the SSH tests then fail, never skip, without it.
SSH_TESTS_ENV = "FLEET_SSH_TESTS"


@dataclass(frozen=True)
class Tool:
    path: str  # an absolute path, or a command name looked up on PATH
    package: str  # the Debian package that provides it

    def present(self) -> bool:
        if os.path.isabs(self.path):
            return os.access(self.path, os.X_OK)
        return shutil.which(self.path) is not None


SSH_TOOLS = (Tool(SSHD, "openssh-server"), Tool("ssh-keygen", "openssh-client"))

Apt = Callable[[Sequence[str]], int]


def _apt(args: Sequence[str]) -> int:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        return subprocess.run(["apt-get", *args], env=env, timeout=APT_TIMEOUT_S).returncode
    except (OSError, subprocess.TimeoutExpired):
        return 127


def ensure_tools(
    tools: Sequence[Tool],
    progress: Callable[[str], None],
    *,
    apt: Apt = _apt,
    is_root: bool | None = None,
    have_apt: bool | None = None,
) -> str | None:
    """Install the missing ``tools`` with apt-get; None when all are present afterwards, else why
    not (one line, for the operator and the tests' skip reason)."""
    missing = [t for t in tools if not t.present()]
    if not missing:
        return None
    packages = sorted({t.package for t in missing})
    names = " ".join(packages)
    root = os.geteuid() == 0 if is_root is None else is_root
    has_apt = shutil.which("apt-get") is not None if have_apt is None else have_apt
    if not has_apt:
        return f"{names} missing and there is no apt-get here: install it to run the SSH tests"
    if not root:
        return f"{names} missing and this is not root: `sudo apt-get install {names}`"
    progress(f"test: {names} missing: installing it from Debian (apt-get install -y {names})")
    if apt(["install", "-y", "-qq", *packages]) != 0:
        progress("test: apt-get install failed; updating the package indexes once and retrying")
        apt(["update", "-qq"])
        apt(["install", "-y", "-qq", *packages])
    still = [t.path for t in missing if not t.present()]
    return f"{names}: installed, but {', '.join(still)} is still missing" if still else None


def ssh_tests_env(progress: Callable[[str], None]) -> dict[str, str]:
    """For ``invoke test``: ``FLEET_SSH_TESTS=1`` once sshd is there, else one line saying why."""
    why = ensure_tools(SSH_TOOLS, progress)
    if why is not None:
        progress(f"test: the SSH transport tests will skip: {why}")
        return {}
    return {SSH_TESTS_ENV: "1"}


__all__ = ["SSHD", "SSH_TESTS_ENV", "SSH_TOOLS", "Tool", "ensure_tools", "ssh_tests_env"]
