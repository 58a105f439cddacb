"""Named, supervised units ``task-<issue>`` on a worker (D3, D4), behind one Supervisor Protocol.

Two backends, chosen per worker (the inventory may force one; ``choose.py``): systemd ``--user``
where the master's user manager answers, else the portable supervisor (``python -m fleet.units``),
which gives the same guarantees with a kernel lock, a detached subreaper and a run time limit.

This package is also the portable supervisor's worker side, started once per claim, and Python
runs a package's ``__init__`` before its ``__main__``: so the names below load on first use
(PEP 562) and a supervising process imports only its own modules (``__main__``, ``procs``,
``record``, ``fleet.core.names``), not the dispatcher side's backends and value types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from fleet.core.names import issue_of, unit_name

if TYPE_CHECKING:
    from fleet.units.base import (
        Claim,
        ClaimCode,
        StopResult,
        Supervisor,
        SupervisorError,
        UnitsParseError,
    )
    from fleet.units.choose import KINDS, choose_supervisor, detect_command
    from fleet.units.portable import PortableSupervisor
    from fleet.units.systemd import (
        NOTIFIER_TEMPLATE,
        SystemdSupervisor,
        notifier_install_command,
        notifier_unit_text,
    )

__all__ = [
    "KINDS",
    "NOTIFIER_TEMPLATE",
    "Claim",
    "ClaimCode",
    "PortableSupervisor",
    "StopResult",
    "Supervisor",
    "SupervisorError",
    "SystemdSupervisor",
    "UnitsParseError",
    "choose_supervisor",
    "detect_command",
    "issue_of",
    "notifier_install_command",
    "notifier_unit_text",
    "unit_name",
]

# Where each lazily loaded name is defined.
_HOMES = {
    "Claim": "base",
    "ClaimCode": "base",
    "StopResult": "base",
    "Supervisor": "base",
    "SupervisorError": "base",
    "UnitsParseError": "base",
    "KINDS": "choose",
    "choose_supervisor": "choose",
    "detect_command": "choose",
    "PortableSupervisor": "portable",
    "NOTIFIER_TEMPLATE": "systemd",
    "SystemdSupervisor": "systemd",
    "notifier_install_command": "systemd",
    "notifier_unit_text": "systemd",
}

if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error for it

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
        globals()[name] = value  # the next lookup finds it without this function
        return value
