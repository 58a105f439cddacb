"""Run a command on a worker: locally as a ``bash -c`` child (``local``), remotely on a session
channel of one ``fabric.Connection`` (``ssh``), behind one small Protocol (``base``). Every
command sent is a shell string whose values were quoted by its builder (``shell``); the transport
prepends the PATH repair of pre-flight check 0 (D3).

``SSHTransport`` is loaded on first use: a command on the embedded default never imports fabric or
paramiko (their import is most of a cold command's start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet.core.model import TransportKind
from fleet.transport.base import (
    CommandTimeout,
    RunResult,
    Stream,
    StreamOpener,
    Transport,
    TransportError,
)
from fleet.transport.local import LocalTransport
from fleet.transport.shell import (
    REACH_PREFIX,
    env_exports,
    parse_reach,
    path_repair,
    probe_reach,
    reach_command,
    reach_token,
    remote_path,
    shell_path,
)

if TYPE_CHECKING:
    from fleet.inventory import WorkerConfig
    from fleet.transport.ssh import SSHTransport


def __getattr__(name: str) -> Any:
    if name == "SSHTransport":
        from fleet.transport.ssh import SSHTransport

        return SSHTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def transport_for(worker: WorkerConfig) -> Transport:
    """The transport an inventory worker names: ``local`` or ``ssh`` (``master`` is the ssh user)."""
    kind = worker.transport
    if kind == TransportKind.LOCAL:
        return LocalTransport(worker.name, path_prefix=worker.path_prefix)
    if kind == TransportKind.SSH:
        if not worker.master:
            raise ValueError(f"worker {worker.name!r}: an ssh worker needs a master (ssh user)")
        from fleet.transport.ssh import SSHTransport

        return SSHTransport(
            worker.name,
            host=worker.host or "",
            port=worker.port or 22,
            user=worker.master,
            key=worker.key,
            known_hosts=worker.known_hosts,
            path_prefix=worker.path_prefix,
        )
    raise ValueError(f"worker {worker.name!r}: unknown transport {kind!r} (local or ssh)")


__all__ = [
    "REACH_PREFIX",
    "CommandTimeout",
    "LocalTransport",
    "RunResult",
    "SSHTransport",
    "Stream",
    "StreamOpener",
    "Transport",
    "TransportError",
    "env_exports",
    "parse_reach",
    "path_repair",
    "probe_reach",
    "reach_command",
    "reach_token",
    "remote_path",
    "shell_path",
    "transport_for",
]
