"""Agent kinds: one adapter per CLI, each turning a run's output into ONE :class:`AgentReport`.

``agent:`` in the inventory stays the command line; ``agent_kind:`` selects the adapter, and when
it is absent :func:`detect_kind` reads the command's first word (with a warning when it cannot
tell). The close-out (``fleet/runner/closeout.py``) reads only the report, so every kind gets the
same D7 retry gate, D8 capacity file, D16 zero-turn rule and D17 results file.

The kinds and their detection (``kind``) load with the package, as the inventory needs them; the
adapters and the report (``adapters``, ``report``) load when first named, by the close-out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet.agentkinds.kind import AgentKind, detect_kind

if TYPE_CHECKING:
    from fleet.agentkinds.adapters import ADAPTERS, Adapter, with_turn_flags
    from fleet.agentkinds.report import AgentReport, ErrorClass

__all__ = [
    "ADAPTERS",
    "Adapter",
    "AgentKind",
    "AgentReport",
    "ErrorClass",
    "detect_kind",
    "with_turn_flags",
]

_LATE = {
    "ADAPTERS": "fleet.agentkinds.adapters",
    "Adapter": "fleet.agentkinds.adapters",
    "with_turn_flags": "fleet.agentkinds.adapters",
    "AgentReport": "fleet.agentkinds.report",
    "ErrorClass": "fleet.agentkinds.report",
}


def __getattr__(name: str) -> Any:
    if name in _LATE:
        import importlib

        return getattr(importlib.import_module(_LATE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
