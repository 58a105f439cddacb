"""The four-worker Docker harness: build the worker image, start and stop the workers, describe them.

The harness exists so the races and faults the seeds measured on real boxes can be replayed here:
four workers with sshd and systemd as PID 1, so a master's ``systemd-run --user --unit=task-<n>``
is the real supervisor (D3) and the real name lock (D4). Worker ``w4`` has two masters, because a
user supervisor is per user and the same unit name under two users is two names (D4's table).

Binding facts (docs/facts.md) shape every step:

- no registry: the image is bootstrapped from Debian's packages (``docker/build-rootfs.sh``) and
  imported; its Python dependencies are wheels built on the host and installed offline. Fleet's own
  code is not in the image: each master runs a clone synced before every run (D11).
- Compose v1 exits 0 on unknown options and ignores ``pull_policy``, so :func:`up` checks the image
  before and the running containers after; published ports change on every start, so they are read
  from ``docker port`` each time (:func:`refresh`), never cached.
- network rules: SSH is published on 127.0.0.1 only (checked here), containers have no default
  route and ``dns: [127.0.0.1]``. Host keys are generated on the host and pinned in a known_hosts
  this module writes, so every connection verifies the host key (``RejectPolicy``).

Everything is a function of explicit arguments with defaults under ``docker/.build/``; the invoke
tasks ``harness.image/up/down/inventory`` are thin wrappers over :func:`build_image`, :func:`up`,
:func:`down` and :func:`write_inventory`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fleet import inventory_builder

REPO = Path(__file__).resolve().parents[2]  # fleet/testing/harness.py -> the repository
DOCKER_DIR = REPO / "docker"
BUILD_DIR = DOCKER_DIR / ".build"  # git-ignored: wheelhouse, rootfs tarball, keys, state
DEFAULT_SHARED_DIR = BUILD_DIR / "shared"

IMAGE_REPO = "fleet-worker"
PROJECT = (
    "fleet-harness"  # the default Compose project: `down` removes this project's containers only
)
PROJECT_ENV = "FLEET_HARNESS_PROJECT"  # another name runs a second harness beside the first


def project() -> str:
    """The Compose project, which also prefixes the container names (``<project>-w1``), so two
    harnesses (a benchmark and a test run) can run side by side without touching each other."""
    name = os.environ.get(PROJECT_ENV, "") or PROJECT
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"{PROJECT_ENV}={name!r}: use lower-case letters, digits, '-' and '_'")
    return name


def container_name(worker: str) -> str:
    return f"{project()}-{worker}"


SSH_PORT = 22
# The masters of each worker. w4 has two: the same unit name under two users is two names (D4).
MASTERS: dict[str, tuple[str, ...]] = {
    "w1": ("alpha",),
    "w2": ("alpha",),
    "w3": ("alpha",),
    "w4": ("alpha", "beta"),
}
# Every user the image has for a master (docker/build-rootfs.sh), in the order a layout takes them.
MASTER_USERS = ("alpha", "beta", "m3", "m4", "m5", "m6", "m7", "m8")
# ``FLEET_HARNESS_MASTERS=K``: K masters on every worker instead of MASTERS, for measuring how the
# fleet scales with masters (bench/scale_bench.py). A harness started with one layout must be taken
# down before it starts with another: a master's user manager is started at boot.
MASTERS_ENV = "FLEET_HARNESS_MASTERS"


def masters() -> dict[str, tuple[str, ...]]:
    """The masters of each worker: :data:`MASTERS`, or K each under ``FLEET_HARNESS_MASTERS``."""
    raw = os.environ.get(MASTERS_ENV, "")
    if not raw:
        return MASTERS
    if not raw.isdigit() or not 1 <= int(raw) <= len(MASTER_USERS):
        raise ValueError(f"{MASTERS_ENV}={raw!r}: a whole number from 1 to {len(MASTER_USERS)}")
    return {w: MASTER_USERS[: int(raw)] for w in MASTERS}


FLEET_GID = 2000  # group of every master in the image (docker/build-rootfs.sh); owns the volume
IMAGE_PYTHON = (3, 11)  # Debian bookworm's python3: the host's wheels must be built for it
VENV_PYTHON = "/opt/fleet-venv/bin/python"  # the image's interpreter with fleet's dependencies

# Bounds on waiting. Each is a multiple of what was measured here, so a slow box passes and a
# broken harness fails with a message instead of hanging the test run.
DOCKER_TIMEOUT_S = 60.0  # one docker/compose CLI call; `up -d` of four workers took ~1.5 s
BUILD_TIMEOUT_S = 1200.0  # mmdebstrap + wheels; measured 25-30 s for mmdebstrap (docs/facts.md)
READY_TIMEOUT_S = 60.0  # boot to a working sshd and user manager; measured ~1.4 s per worker
SSH_TIMEOUT_S = (
    10.0  # one TCP connect / banner / auth on loopback; a paused container never answers
)
READY_POLL_S = 0.25  # pause between readiness probes while a worker boots


class HarnessError(RuntimeError):
    """The harness cannot be built, started or reached; the message says which step and why."""


class EngineUnavailable(HarnessError):
    """No Docker engine or no docker-compose here: the docker tests skip, `harness.up` stops."""


class ImageMissing(HarnessError):
    """The image for the current build inputs does not exist; Compose v1 would try to pull it."""


class NotRunning(HarnessError):
    """`docker-compose up` returned, but a worker is not running (v1 exits 0 on unknown options)."""


class NotReady(HarnessError):
    """A worker runs but its sshd or its master's user manager did not answer in time."""


@dataclass(frozen=True)
class Container:
    """One worker container: its Compose service name (= hostname = lane), host port, masters."""

    name: str  # "w1".."w4"
    container: str  # the docker container name, "fleet-w1"
    port: int  # the host port published for its sshd on 127.0.0.1
    masters: tuple[str, ...]


@dataclass(frozen=True)
class Endpoint:
    """One (container, master) pair: one inventory worker, one user supervisor."""

    name: str  # inventory worker name: "w1", or "w4-alpha" where a container has two masters
    container: Container
    master: str

    @property
    def port(self) -> int:
        return self.container.port


@dataclass(frozen=True)
class HarnessInfo:
    image: str
    shared_dir: Path  # the same absolute path on the host and in every worker
    key: Path  # the controller's private key (OpenSSH format)
    known_hosts: Path  # `[127.0.0.1]:PORT ssh-ed25519 ...` for the current ports
    containers: tuple[Container, ...]

    def endpoints(self) -> tuple[Endpoint, ...]:
        out = []
        for c in self.containers:
            for master in c.masters:
                name = c.name if len(c.masters) == 1 else f"{c.name}-{master}"
                out.append(Endpoint(name, c, master))
        return tuple(out)


Progress = Callable[[str], None]


# --- the engine ------------------------------------------------------------------------------------


def _run(
    args: Sequence[str],
    *,
    timeout: float = DOCKER_TIMEOUT_S,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a CLI call with a bound; a non-zero exit raises with the command and its stderr."""
    try:
        proc = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except FileNotFoundError as e:
        raise EngineUnavailable(f"{args[0]}: command not found") from e
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"`{' '.join(args)}` did not finish within {timeout:.0f} s") from e
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise HarnessError(f"`{' '.join(args)}` exited {proc.returncode}: {detail}")
    return proc


def engine_available() -> tuple[bool, str]:
    """Is there a Docker engine and Compose v1 here? ``(False, one-line reason)`` when not."""
    try:
        info = _run(
            ["docker", "info", "--format", "{{.ServerVersion}} cgroup v{{.CgroupVersion}}"],
            timeout=15,
            check=False,
        )
        if info.returncode != 0:
            first = (info.stderr.strip().splitlines() or ["no answer"])[0]
            return False, f"no Docker engine: {first}"
    except HarnessError as e:
        return False, f"no Docker engine: {e}"
    # Found, not run: `docker-compose version` costs 1.5 s of Python start-up, paid on every
    # collection of the docker tests.
    compose = shutil.which("docker-compose")
    if compose is None:
        return False, "docker-compose (Compose v1) is not installed"
    return True, f"docker {info.stdout.strip()}, {compose}"


def cgroup_version() -> int:
    """1 or 2: which compose override systemd as PID 1 needs on this engine."""
    out = _run(["docker", "info", "--format", "{{.CgroupVersion}}"]).stdout.strip()
    if out not in ("1", "2"):
        raise HarnessError(f"docker info reports an unknown cgroup version {out!r}")
    return int(out)


def image_exists(tag: str) -> bool:
    return _run(["docker", "image", "inspect", tag], check=False).returncode == 0


# --- the image -------------------------------------------------------------------------------------


def debian_mirrors() -> tuple[str, ...]:
    """The Debian mirrors of this machine's apt configuration, as mmdebstrap ``deb`` lines.

    Read, never written down: the repository names no mirror or registry host.
    """
    out = _run(
        [
            "apt-get",
            "indextargets",
            "--format",
            "$(REPO_URI) $(RELEASE) $(COMPONENT)",
            "Identifier: Packages",
            "Origin: Debian",
        ]
    ).stdout
    lines = sorted({f"deb {line.strip()}" for line in out.splitlines() if line.strip()})
    if not lines:
        raise HarnessError("apt has no Debian package index here; run `apt-get update` first")
    return tuple(lines)


def runtime_dependencies(pyproject: Path = REPO / "pyproject.toml") -> tuple[str, ...]:
    """The requirements the image carries: ``project.dependencies``, not fleet itself (D11)."""
    data = tomllib.loads(pyproject.read_text())
    return tuple(data["project"]["dependencies"])


def _image_files() -> list[Path]:
    root = DOCKER_DIR / "rootfs"
    return [DOCKER_DIR / "build-rootfs.sh", *sorted(p for p in root.rglob("*") if p.is_file())]


def image_tag(deps: Iterable[str]) -> str:
    """``fleet-worker:<hash>`` of everything that goes into the image, so an unchanged input set
    reuses the image and any change (the build script, a file of the overlay, a dependency) builds
    a new one. The mirror is not an input: any Debian mirror serves the same bookworm packages, and
    leaving it out keeps `up` from reading apt's lists (3 s here)."""
    h = hashlib.sha256()
    for path in _image_files():
        mode = stat.S_IMODE(path.stat().st_mode) & 0o111  # the exec bit reaches the image
        h.update(f"{path.relative_to(DOCKER_DIR)}\0{mode:o}\0".encode())
        h.update(path.read_bytes() + b"\0")
    for line in (*deps, "--", "python{}.{}".format(*IMAGE_PYTHON)):
        h.update(line.encode() + b"\0")
    return f"{IMAGE_REPO}:{h.hexdigest()[:16]}"


def _stream(args: Sequence[str], progress: Progress, *, timeout: float) -> None:
    """Run a long build step, passing each output line to ``progress``; fail with its tail.

    coreutils' ``timeout`` bounds the step even when it hangs without printing a line.
    """
    progress(f"$ {' '.join(args)}")
    tail: list[str] = []
    bounded = ["timeout", "--kill-after=10", f"{timeout:.0f}", *args]
    with subprocess.Popen(
        bounded, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            progress(f"  {line.rstrip()}")
            tail = [*tail[-19:], line.rstrip()]
        rc = proc.wait()
    if rc == 124:
        raise HarnessError(f"`{args[0]}` did not finish within {timeout:.0f} s")
    if rc != 0:
        raise HarnessError(f"`{' '.join(args)}` exited {rc}:\n" + "\n".join(tail))


def _ensure_mmdebstrap(progress: Progress) -> None:
    if shutil.which("mmdebstrap"):
        return
    progress("mmdebstrap is missing: installing it from Debian (apt-get install -y mmdebstrap)")
    _stream(["apt-get", "install", "-y", "mmdebstrap"], progress, timeout=BUILD_TIMEOUT_S)


def _build_wheelhouse(deps: Sequence[str], wheels: Path, progress: Progress) -> None:
    """Wheels of the runtime dependencies, built here for the image's Python (no registry there)."""
    if sys.version_info[:2] != IMAGE_PYTHON:
        want, have = "{}.{}".format(*IMAGE_PYTHON), "{}.{}".format(*sys.version_info[:2])
        raise HarnessError(
            f"the wheelhouse must be built by Python {want} (the image's), not {have}"
        )
    shutil.rmtree(wheels, ignore_errors=True)  # stale versions must not reach the image
    wheels.mkdir(parents=True)
    _stream(
        [sys.executable, "-m", "pip", "wheel", "--wheel-dir", str(wheels), *deps],
        progress,
        timeout=BUILD_TIMEOUT_S,
    )


def build_image(*, progress: Progress = print, build_dir: Path = BUILD_DIR) -> str:
    """Build ``fleet-worker:<hash>`` unless it exists; tag it ``fleet-worker:latest``; return the tag.

    Idempotent: the tag is a hash of the build inputs (:func:`image_tag`), so a second call with
    nothing changed costs one ``docker image inspect``.
    """
    deps = runtime_dependencies()
    tag = image_tag(deps)
    if image_exists(tag):
        progress(f"image {tag} exists for the current build inputs: reusing it")
        _run(["docker", "tag", tag, f"{IMAGE_REPO}:latest"])
        return tag
    started = time.monotonic()
    mirrors = debian_mirrors()
    progress(f"building {tag} from {', '.join(mirrors)}")
    _ensure_mmdebstrap(progress)
    wheels = build_dir / "wheels"
    _build_wheelhouse(deps, wheels, progress)
    tarball = build_dir / "rootfs.tar"
    tarball.unlink(missing_ok=True)
    try:
        _stream(
            ["bash", str(DOCKER_DIR / "build-rootfs.sh"), str(tarball), str(wheels), *mirrors],
            progress,
            timeout=BUILD_TIMEOUT_S,
        )
        progress(f"docker import {tarball} {tag}")
        _run(
            [
                "docker",
                "import",
                "--change",
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--change",
                "ENV container=docker",  # systemd's container detection
                "--change",
                'CMD ["/usr/local/sbin/harness-init"]',
                str(tarball),
                tag,
            ],
            timeout=BUILD_TIMEOUT_S,
        )
    finally:
        tarball.unlink(missing_ok=True)
    _run(["docker", "tag", tag, f"{IMAGE_REPO}:latest"])
    progress(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


def current_image() -> str:
    """The tag for the current inputs, which must exist: Compose v1 would otherwise try to pull."""
    tag = image_tag(runtime_dependencies())
    if not image_exists(tag):
        raise ImageMissing(f"image {tag} does not exist: run `invoke harness.image` first")
    return tag


# --- keys ------------------------------------------------------------------------------------------


def _keypair(private: Path, comment: str) -> str:
    """An ed25519 key pair in OpenSSH format, made once and reused; returns the public line."""
    public = private.with_name(private.name + ".pub")
    if not (private.exists() and public.exists()):
        key = Ed25519PrivateKey.generate()
        private.parent.mkdir(parents=True, exist_ok=True)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        pub = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        public.write_text(f"{pub.decode()} {comment}\n")
    return public.read_text().strip()


def ensure_keys(keys_dir: Path) -> Path:
    """The controller's key and each worker's sshd files under ``keys_dir``; returns the key path.

    ``keys_dir/<worker>/`` is bind-mounted read-only at ``/etc/ssh/harness``: the host key and one
    ``authorized_keys.<master>`` per master of that worker (only they can log in there).
    """
    keys_dir.mkdir(parents=True, exist_ok=True)
    client = keys_dir / "client" / "id_ed25519"
    client_pub = _keypair(client, "fleet-harness-controller")
    for worker, names in masters().items():
        d = keys_dir / worker
        _keypair(d / "ssh_host_ed25519_key", f"root@{worker}")
        d.chmod(0o755)  # sshd's StrictModes checks the directory of authorized_keys
        for old in d.glob("authorized_keys.*"):
            old.unlink()
        for master in names:
            (d / f"authorized_keys.{master}").write_text(client_pub + "\n")
    return client


def _host_key(keys_dir: Path, worker: str) -> str:
    kind, blob = (keys_dir / worker / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    return f"{kind} {blob}"


def known_hosts_text(containers: Iterable[Container], keys_dir: Path) -> str:
    return "".join(f"[127.0.0.1]:{c.port} {_host_key(keys_dir, c.name)}\n" for c in containers)


# --- the shared volume -----------------------------------------------------------------------------

_ACL_VERSION = 2
_ACL_USER_OBJ, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x01, 0x04, 0x08, 0x10, 0x20
_ACL_UNDEFINED_ID = 0xFFFFFFFF


def _default_acl(gid: int) -> bytes:
    """A default ACL granting ``gid`` rwx, in the kernel's xattr layout (sorted by tag)."""
    entries = [
        (_ACL_USER_OBJ, 7, _ACL_UNDEFINED_ID),
        (_ACL_GROUP_OBJ, 7, _ACL_UNDEFINED_ID),
        (_ACL_GROUP, 7, gid),
        (_ACL_MASK, 7, _ACL_UNDEFINED_ID),
        (_ACL_OTHER, 5, _ACL_UNDEFINED_ID),
    ]
    return struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def grant_shared(path: Path) -> None:
    """Make ``path`` (recursively) readable and writable by every master (group ``FLEET_GID``).

    The host writes as root and each master as its own uid. New files in the shared directory
    inherit the group (setgid) and group write (default ACL), but SQLite creates its database with
    mode 0644 and git its objects 0444 whatever the ACL says: call this after creating a board or an
    origin on the host (``git init --bare --shared=group`` keeps an origin group-writable after).
    """
    for p in [path, *(path.rglob("*") if path.is_dir() else ())]:
        if p.is_symlink():
            continue
        os.chown(p, -1, FLEET_GID)
        mode = stat.S_IMODE(p.stat().st_mode) | stat.S_IRGRP | stat.S_IWGRP
        if p.is_dir():
            mode |= stat.S_IXGRP | stat.S_ISGID
        p.chmod(mode)


def prepare_shared(shared_dir: Path) -> Path:
    """Create the shared directory for the masters: absolute, group ``FLEET_GID``, setgid, with a
    default ACL so files written later by either side stay group-writable."""
    if not shared_dir.is_absolute():
        raise HarnessError(f"the shared directory must be an absolute path, got {shared_dir}")
    shared_dir.mkdir(parents=True, exist_ok=True)
    grant_shared(shared_dir)
    try:
        os.setxattr(shared_dir, "system.posix_acl_default", _default_acl(FLEET_GID))
    except OSError as e:  # the file system has no ACLs: grant_shared() still works per file
        print(
            f"harness: no default ACL on {shared_dir} ({e}); call grant_shared() after writes",
            file=sys.stderr,
        )
    return shared_dir


# --- compose ---------------------------------------------------------------------------------------


def _state_file(build_dir: Path) -> Path:
    return build_dir / "harness" / f"{project()}.state.json"


def _compose(
    command: Sequence[str], env_values: dict[str, str], timeout: float = DOCKER_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    files = (a for f in compose_files() for a in ("-f", f))
    args = ["docker-compose", *files, "-p", project(), *command]
    return _run(args, timeout=timeout, env={**os.environ, **env_values})


def compose_env(image: str, keys_dir: Path, shared_dir: Path) -> dict[str, str]:
    """The variables compose.yaml reads; also what a pytest-docker fixture must export."""
    return {
        "FLEET_HARNESS_IMAGE": image,
        "FLEET_HARNESS_KEYS": str(keys_dir),
        "FLEET_HARNESS_SHARED": str(shared_dir),
        PROJECT_ENV: project(),
    }


def compose_files() -> list[str]:
    """compose.yaml plus the override for this engine's cgroup version, as absolute paths."""
    return [
        str(DOCKER_DIR / "compose.yaml"),
        str(DOCKER_DIR / f"compose.cgroup{cgroup_version()}.yaml"),
    ]


def prepare(shared_dir: Path, *, build_dir: Path = BUILD_DIR) -> dict[str, str]:
    """Everything before ``docker-compose up``: the image must exist, keys and the shared directory
    are made, and the Compose variables are recorded so :func:`down` can run without arguments."""
    image = current_image()
    keys_dir = build_dir / "harness" / "keys"
    ensure_keys(keys_dir)
    prepare_shared(shared_dir)
    env = compose_env(image, keys_dir, shared_dir)
    state = _state_file(build_dir)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(env, indent=2) + "\n")
    return env


def _published_port(container: str) -> int:
    out = _run(["docker", "port", container, f"{SSH_PORT}/tcp"]).stdout.split()
    if not out:
        raise NotRunning(f"{container} publishes no port for sshd")
    host, _, port = out[0].rpartition(":")
    if host != "127.0.0.1":  # the network rules: SSH on loopback only
        raise HarnessError(f"{container} publishes sshd on {host}, not on 127.0.0.1 only")
    return int(port)


def refresh(shared_dir: Path | None = None, *, build_dir: Path = BUILD_DIR) -> HarnessInfo:
    """The harness as it runs now: every worker running, its current port, a fresh known_hosts.

    Call it after every ``up``, ``docker start`` or ``network connect``: the port changes then.
    """
    env = json.loads(_state_file(build_dir).read_text())
    keys_dir = Path(env["FLEET_HARNESS_KEYS"])
    layout = masters()
    names = [container_name(w) for w in layout]
    out = _run(["docker", "inspect", "-f", "{{.Name}} {{.State.Status}}", *names], check=False)
    states = dict(line.lstrip("/").split()[:2] for line in out.stdout.splitlines() if line.strip())
    down_ = [n for n in names if states.get(n) != "running"]
    if down_:
        seen = ", ".join(f"{n}={states.get(n, 'absent')}" for n in down_)
        raise NotRunning(f"harness workers not running after docker-compose: {seen}")
    containers = tuple(
        Container(w, container_name(w), _published_port(container_name(w)), users)
        for w, users in layout.items()
    )
    known_hosts = build_dir / "harness" / f"{project()}.known_hosts"
    known_hosts.write_text(known_hosts_text(containers, keys_dir))
    return HarnessInfo(
        image=env["FLEET_HARNESS_IMAGE"],
        shared_dir=shared_dir or Path(env["FLEET_HARNESS_SHARED"]),
        key=keys_dir / "client" / "id_ed25519",
        known_hosts=known_hosts,
        containers=containers,
    )


def connect(
    info: HarnessInfo, endpoint: Endpoint, *, timeout: float = SSH_TIMEOUT_S
) -> paramiko.SSHClient:
    """An SSH connection to one master, host key verified against the harness's known_hosts.

    ``TCP_NODELAY`` is set: without it Nagle + delayed ACK cost ~40 ms per command
    (docs/facts.md).
    """
    sock = socket.create_connection(("127.0.0.1", endpoint.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client = paramiko.SSHClient()
    client.load_host_keys(str(info.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            "127.0.0.1",
            port=endpoint.port,
            username=endpoint.master,
            key_filename=str(info.key),
            look_for_keys=False,
            allow_agent=False,
            sock=sock,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
        )
    except BaseException:
        client.close()
        sock.close()
        raise
    return client


def run(
    client: paramiko.SSHClient, command: str, *, timeout: float = SSH_TIMEOUT_S
) -> tuple[int, str, str]:
    """Run one command over an open connection: ``(exit status, stdout, stderr)``."""
    _, out, err = client.exec_command(command, timeout=timeout)
    stdout, stderr = out.read().decode(), err.read().decode()
    return out.channel.recv_exit_status(), stdout, stderr


def _banner(port: int) -> bool:
    """Does sshd answer on ``port``? While a worker boots, docker-proxy accepts the connection and
    closes it at once; probing the banner here keeps paramiko from logging a traceback per try."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=SSH_TIMEOUT_S) as sock:
            sock.settimeout(SSH_TIMEOUT_S)
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def wait_ready(info: HarnessInfo, *, timeout: float = READY_TIMEOUT_S) -> None:
    """Every master logs in and its user manager has finished starting (so ``systemd-run --user``
    works); raise :class:`NotReady` naming the endpoint and the last error otherwise."""
    deadline = time.monotonic() + timeout
    for ep in info.endpoints():
        last = "no attempt"
        while not _banner(ep.port):
            last = "sshd does not answer with a banner"
            if time.monotonic() > deadline:
                raise NotReady(
                    f"{ep.name} ({ep.container.container}:{ep.port}) not ready within "
                    f"{timeout:.0f} s: {last}"
                )
            time.sleep(READY_POLL_S)
        while True:
            try:
                client = connect(info, ep)
                try:
                    rc, out, err = run(
                        client,
                        "systemctl --user is-system-running --wait",
                        timeout=max(1.0, deadline - time.monotonic()),
                    )
                finally:
                    client.close()
                if out.strip() in ("running", "degraded"):
                    break
                last = f"user manager is {out.strip() or err.strip()!r} (exit {rc})"
            except (OSError, paramiko.SSHException, EOFError) as e:
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise NotReady(
                    f"{ep.name} ({ep.container.container}:{ep.port}, {ep.master}) "
                    f"not ready within {timeout:.0f} s: {last}"
                )
            time.sleep(READY_POLL_S)


def up(shared_dir: Path | None = None, *, build_dir: Path = BUILD_DIR) -> HarnessInfo:
    """Start the four workers (the image must exist), wait until every master answers, and return
    their ports, key and known_hosts. The shared directory defaults to one per Compose project."""
    shared_dir = shared_dir or DEFAULT_SHARED_DIR / project()
    env = prepare(shared_dir, build_dir=build_dir)
    _compose(["up", "-d", "--no-build"], env)
    info = refresh(shared_dir, build_dir=build_dir)
    wait_ready(info)
    return info


def down(*, build_dir: Path = BUILD_DIR) -> None:
    """Stop and remove the harness's containers and network; a harness that is not up is fine.

    Compose needs its variables to parse the file even to tear down, so the values recorded by
    :func:`prepare` are used (placeholders if it never ran). Whatever Compose leaves behind with
    this project's label is removed by id: only containers this harness started.
    """
    label = f"label=com.docker.compose.project={project()}"
    containers = _run(["docker", "ps", "-aq", "--filter", label]).stdout.split()
    networks = _run(["docker", "network", "ls", "-q", "--filter", label]).stdout.split()
    if not containers and not networks:
        return  # nothing of ours is there: skip Compose's ~3 s start-up
    state = _state_file(build_dir)
    env = (
        json.loads(state.read_text())
        if state.exists()
        else compose_env(
            f"{IMAGE_REPO}:latest", build_dir / "harness" / "keys", DEFAULT_SHARED_DIR / project()
        )
    )
    _compose(["down", "--remove-orphans", "--timeout", "10"], env)
    left = _run(["docker", "ps", "-aq", "--filter", label]).stdout.split()
    if left:
        _run(["docker", "rm", "-f", *left])


# --- the inventory ---------------------------------------------------------------------------------

WORK_DIR = "fleet-work"  # under each master's home: the target clone and the worker state
RUNNER_CLONE = "fleet-work/fleet"  # under each master's home: the fleet the master runs (D11)
HARNESS_MAX_RUN_S = 900  # RuntimeMaxSec in the harness: bounds a hung demo agent; the demo's runs
# take seconds, so 15 min only catches a wedge without cutting a slow CI box's run short.


def inventory_data(
    info: HarnessInfo,
    *,
    board_dir: Path,
    state_dir: Path,
    runner_remote: str | None = None,
    work: str = WORK_DIR,
    policy: Mapping[str, object] | None = None,
    max_run_s: int = HARNESS_MAX_RUN_S,
) -> dict[str, object]:
    """The harness inventory as plain data (fleet.inventory_builder; schema: fleet/inventory.py),
    one worker per endpoint.

    ``board_dir`` holds the board and the origin and must lie inside the shared directory, so a path
    written here means the same file on the host and in every worker. ``state_dir`` (trace, lock,
    halt) stays on the host. ``runner_remote`` is the repository each master's runner clone syncs
    from before every run (D11); by default ``<board_dir>/fleet.git``, which the caller fills.
    ``work`` is the directory under each master's home that holds the target clone and the worker
    state: two boards on one harness need two, or the clone would keep the first board's origin.
    The runner clone is always ``~/fleet-work/fleet``: one fleet checkout per master. ``policy``
    holds the values that differ from the defaults (none by default); ``max_run_s`` is every
    worker's run-time limit.
    """
    board_dir, shared = board_dir.resolve(), info.shared_dir.resolve()
    if not board_dir.is_relative_to(shared):
        raise HarnessError(
            f"board_dir {board_dir} is not inside the shared directory {shared}: "
            "the workers could not reach the board and the origin"
        )
    remote = runner_remote or str(board_dir / "fleet.git")
    workers = [_worker_data(info, ep, remote, work, max_run_s) for ep in info.endpoints()]
    return inventory_builder.inventory(
        board=inventory_builder.local_board(board_dir / "board.sqlite3", board_dir / "origin.git"),
        lock=state_dir / "fleet.lock",
        halt=state_dir / "HALT",
        policy=policy,
        state_dir=state_dir,
        workers=workers,
    )


def _worker_data(
    info: HarnessInfo, ep: Endpoint, runner_remote: str, work: str, max_run_s: int
) -> dict[str, object]:
    """One endpoint's inventory worker: over SSH to its container's published port, as its own
    master, with its clone and state under ``~/<work>`` and the shared runner clone."""
    home = f"/home/{ep.master}"
    return inventory_builder.worker(
        ep.name,
        transport="ssh",
        host="127.0.0.1",
        port=ep.port,
        master=ep.master,
        lane=ep.container.name,
        clone=f"{home}/{work}/target",
        runner_clone=f"{home}/{RUNNER_CLONE}",
        runner_remote=runner_remote,
        # D3: the unit does not inherit PATH; the venv first so `python` is fleet's python.
        path_prefix=[str(Path(VENV_PYTHON).parent), "~/.local/bin"],
        agent="python -m fleet.agents.demo",
        supervisor="systemd",
        key=info.key,
        known_hosts=info.known_hosts,
        state_dir=f"{home}/{work}/state",
        python=VENV_PYTHON,
        max_run_s=max_run_s,
    )


def write_inventory(
    info: HarnessInfo,
    path: Path,
    *,
    board_dir: Path,
    runner_remote: str | None = None,
    work: str = WORK_DIR,
    policy: Mapping[str, object] | None = None,
    max_run_s: int = HARNESS_MAX_RUN_S,
) -> Path:
    """Write the harness inventory to ``path`` (host state next to it, in ``<path stem>-state``)."""
    state_dir = path.resolve().parent / f"{path.stem}-state"
    data = inventory_data(
        info,
        board_dir=board_dir,
        state_dir=state_dir,
        runner_remote=runner_remote,
        work=work,
        policy=policy,
        max_run_s=max_run_s,
    )
    header = (
        "Generated by fleet.testing.harness.write_inventory() for the Docker harness: the ports are\n"
        "the ones published now and change on every start. Do not edit; regenerate."
    )
    return inventory_builder.write(path, data, header=header)


# --- a fleet on the harness ------------------------------------------------------------------------

# A .pth line in the image's venv: each master imports fleet from its OWN runner clone (D11), found
# through its home, so one venv serves both masters of w4 and the image carries no fleet code.
RUNNER_PTH = "/opt/fleet-venv/lib/python{}.{}/site-packages/fleet-runner-clone.pth".format(
    *IMAGE_PYTHON
)
_PTH_LINE = (
    f"import os, sys; p = os.path.expanduser('~/{RUNNER_CLONE}'); "
    "p in sys.path or not os.path.isdir(p) or sys.path.append(p)\n"
)
# Who made a snapshot commit: the harness, under a fixed identity (no git config needed on CI).
_SNAPSHOT_ENV = {
    "GIT_AUTHOR_NAME": "fleet harness",
    "GIT_AUTHOR_EMAIL": "harness@fleet.invalid",
    "GIT_COMMITTER_NAME": "fleet harness",
    "GIT_COMMITTER_EMAIL": "harness@fleet.invalid",
}
GIT_TIMEOUT_S = 120.0  # one git call on local files: a snapshot of fleet is under 1 MB


def _git(*args: str, cwd: Path | None = None) -> str:
    where = ["-C", str(cwd)] if cwd is not None else []
    env = {**os.environ, **_SNAPSHOT_ENV}
    return _run(["git", *where, *args], timeout=GIT_TIMEOUT_S, env=env).stdout


def _bare(path: Path) -> None:
    """A group-shared bare repository (every master pushes and fetches), made once."""
    if not (path / "HEAD").exists():
        _git("init", "-q", "--bare", "--shared=group", "--initial-branch=main", str(path))


def publish_source(remote: Path, *, source: Path = REPO) -> str:
    """Commit ``source`` as it is on disk now (tracked and untracked-but-not-ignored files) to
    ``main`` of the bare repository ``remote``, which every master's runner clone syncs from (D11).

    The commit is made in a scratch repository, so ``source`` and its git state are untouched, and
    the code under test — uncommitted edits included — is what the masters run. Returns the commit.
    """
    _bare(remote)
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=source)
    with tempfile.TemporaryDirectory(prefix="fleet-snapshot-") as tmp:
        scratch = Path(tmp)
        for rel in sorted({r for r in listed.split("\0") if r}):
            src = source / rel
            if not src.is_file():  # a tracked file deleted in the working tree
                continue
            dst = scratch / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        _git("init", "-q", "--initial-branch=main", str(scratch))
        _git("add", "-A", cwd=scratch)
        tree = _git("write-tree", cwd=scratch).strip()
        parent = _git("ls-remote", str(remote), "refs/heads/main", cwd=scratch).split()[:1]
        if parent:
            _git("fetch", "-q", str(remote), "refs/heads/main", cwd=scratch)
            if _git("rev-parse", "FETCH_HEAD^{tree}", cwd=scratch).strip() == tree:
                return parent[0]  # unchanged code: nothing to publish, no runner re-syncs
        # A child of the published main: a shared repository refuses non-fast-forward pushes,
        # and a master's clone that is behind is exactly the stale runner D11 syncs.
        message = "fleet source snapshot for the harness"
        commit = _git(
            "commit-tree", tree, *(("-p", parent[0]) if parent else ()), "-m", message, cwd=scratch
        ).strip()
        _git("push", "-q", str(remote), f"{commit}:refs/heads/main", cwd=scratch)
    grant_shared(remote)
    return commit


def install_runner(info: HarnessInfo, remote: Path, *, progress: Progress = print) -> None:
    """Give every master a runner: its clone of ``remote`` at ``~/fleet-work/fleet``, synced and
    verified, and the venv line that imports fleet from it. Idempotent; run it after every ``up``
    (the .pth lives in the container, which ``down`` removes). Check 8's "runner present" passes
    after this, and fails again if a master's clone is removed (a testable NO_RUNNER)."""
    from fleet.core.sync import parse_sync, sync_command
    from fleet.observe import runner_check

    pth = shlex.quote(_PTH_LINE)
    for c in info.containers:
        write = f"printf '%s' {pth} > {RUNNER_PTH}"
        _run(["docker", "exec", "-u", "root", c.container, "sh", "-c", write])
    for ep in info.endpoints():
        client = connect(info, ep)
        try:
            clone = f"/home/{ep.master}/{RUNNER_CLONE}"
            sync = sync_command(clone, origin=str(remote), note="harness install")
            rc, out, err = run(client, sync, timeout=GIT_TIMEOUT_S)
            synced = parse_sync(out)
            if not synced.synced:
                raise HarnessError(f"{ep.name}: runner clone {clone}: {synced.detail} {err}")
            check = runner_check(_PythonOnly(VENV_PYTHON))  # type: ignore[arg-type]
            rc, out, err = run(client, check)
            if rc != 0:
                raise HarnessError(f"{ep.name}: {VENV_PYTHON} cannot import fleet.runner: {err}")
        finally:
            client.close()
        progress(f"{ep.name}: runner clone {clone} at {synced.detail}")


@dataclass(frozen=True)
class _PythonOnly:
    python: str  # what observe.runner_check reads of a WorkerConfig


def deploy(
    info: HarnessInfo,
    name: str = "board",
    *,
    path: Path | None = None,
    source: Path = REPO,
    progress: Progress = print,
) -> Path:
    """A working fleet on the running harness; returns its inventory path.

    Makes, inside the shared directory, ``<name>/``: the SQLite board, its bare origin and the
    inventory, at ``path`` or ``<name>/inventory.yaml``: a runner reads it inside its container, so
    it must lie in the shared directory too. Publishes ``source`` to ``fleet.git`` (one per harness)
    and installs every master's runner from it. Each name gets its own target clone and worker
    state on the masters (``~/fleet-boards/<name>``), so two boards never share a clone that tracks
    the wrong origin. Idempotent. Unit names are ``task-<issue>`` per master whatever the board, so
    two boards on one harness share that name space: a test leaves no unit live when it ends.
    """
    from fleet.board.local import LocalBoard

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise HarnessError(f"deploy name {name!r}: use letters, digits, '.', '-' and '_'")
    board_dir = info.shared_dir / name
    path = (path or board_dir / "inventory.yaml").absolute()
    if not path.is_relative_to(info.shared_dir.absolute()):
        raise HarnessError(
            f"inventory {path} is not inside the shared directory {info.shared_dir}: "
            "the runners could not read it in the containers"
        )
    board_dir.mkdir(parents=True, exist_ok=True)
    origin = board_dir / "origin.git"
    _bare(origin)
    LocalBoard.create(board_dir / "board.sqlite3", origin).disconnect()
    remote = info.shared_dir / "fleet.git"
    commit = publish_source(remote, source=source)
    progress(f"published {source} as {commit[:12]} to {remote}")
    path = write_inventory(
        info,
        path,
        board_dir=board_dir,
        runner_remote=str(remote),
        work=f"fleet-boards/{name}",
    )
    grant_shared(board_dir)
    install_runner(info, remote, progress=progress)
    return path
