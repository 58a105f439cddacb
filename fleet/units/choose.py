"""Which supervisor a worker's units run under: the inventory's word, or systemd when its user
manager answers over the worker's transport, else the portable supervisor."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from fleet.core.model import SupervisorKind
from fleet.units.base import Supervisor
from fleet.units.portable import PortableSupervisor
from fleet.units.systemd import NOTIFIER_TEMPLATE, SystemdSupervisor

if TYPE_CHECKING:  # the worker side (python -m fleet.units) must start without fabric
    from fleet.transport import Transport

KINDS = tuple(SupervisorKind)
# Bounds the detection round trip: show-environment answers in milliseconds or not at all.
DETECT_TIMEOUT_S = 20.0


def detect_command() -> str:
    """Succeeds only where a systemd user manager answers over this transport (no bus = fail)."""
    return "systemctl --user show-environment >/dev/null 2>&1"


def choose_supervisor(
    transport: Transport,
    *,
    worker: str,
    master: str,
    state_dir: str,
    python: str,
    kind: SupervisorKind = SupervisorKind.AUTO,
    notify: bool = False,
) -> Supervisor:
    """The worker's supervisor: ``kind`` from the inventory, or ``auto`` — systemd when
    ``systemctl --user show-environment`` works over this transport, else portable.

    ``notify`` wires the on-failure alarm (D3 property 4): systemd's ``OnFailure=`` points at
    :data:`NOTIFIER_TEMPLATE` (install it first), the portable supervisor runs the same
    ``python -m fleet.units notify``. A TransportError from the detection propagates: an
    unreachable worker is not a worker without systemd (D20).
    """
    if kind not in KINDS:
        names = tuple(k.value for k in KINDS)
        raise ValueError(f"supervisor kind must be one of {names}, got {kind!r}")
    if kind == SupervisorKind.AUTO:
        kind = (
            SupervisorKind.SYSTEMD
            if transport.run(detect_command(), timeout=DETECT_TIMEOUT_S).ok
            else SupervisorKind.PORTABLE
        )
    if kind == SupervisorKind.SYSTEMD:
        notifier = NOTIFIER_TEMPLATE if notify else None
        return SystemdSupervisor(transport, worker=worker, master=master, notifier=notifier)
    portable_notifier = (
        shlex.join([python, "-m", "fleet.units", "notify"]) + ' "$FLEET_UNIT"' if notify else None
    )
    return PortableSupervisor(
        transport,
        worker=worker,
        master=master,
        state_dir=state_dir,
        python=python,
        notifier=portable_notifier,
    )
