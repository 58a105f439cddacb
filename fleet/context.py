"""The wiring of one fleet command: inventory, board, and a transport + supervisor per worker.

Nothing here decides anything. Transports are opened lazily and reused for the whole command (an SSH
connection costs ~120 ms to open and ~2 ms per command once open: docs/facts.md), and closed once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TextIO

from fleet.board.base import Board
from fleet.core.model import SupervisorKind
from fleet.inventory import Inventory, WorkerConfig
from fleet.transport import Transport
from fleet.units import Supervisor, choose_supervisor


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class FleetContext:
    inventory: Inventory
    board: Board
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Callable[[], datetime] = _now
    transport_factory: Callable[[WorkerConfig], Transport] | None = None
    _transports: dict[str, Transport] = field(default_factory=dict)
    _supervisors: dict[str, Supervisor] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def warn(self, line: str) -> None:
        """One line on stderr: how a guard that fails open says so (D5)."""
        with self._guard:  # one write per line: threads must not interleave halves of lines
            self.stderr.write(line.rstrip("\n") + "\n")
            self.stderr.flush()

    def worker(self, name: str) -> WorkerConfig | None:
        return self.inventory.worker(name)

    def transport(self, w: WorkerConfig) -> Transport:
        with self._guard:
            t = self._transports.get(w.name)
            if t is None:
                if self.transport_factory is not None:
                    t = self.transport_factory(w)
                else:
                    from fleet.transport import transport_for

                    t = transport_for(w)
                self._transports[w.name] = t
            return t

    def supervisor(self, w: WorkerConfig, *, kind: SupervisorKind | None = None) -> Supervisor:
        """The worker's supervisor, made once per command. ``kind``: what an ``auto`` worker's
        probe already detected (fleet.observe), so no second round trip asks again."""
        with self._guard:
            s = self._supervisors.get(w.name)
        if s is None:
            t = self.transport(w)
            s = choose_supervisor(
                t,
                worker=w.name,
                master=w.master or "",
                state_dir=f"{w.state_dir}/units",
                python=w.python,
                kind=kind or w.supervisor,
                notify=True,  # D3 property 4: OnFailure= is a free alarm
            )
            if s.kind == SupervisorKind.SYSTEMD:
                self._install_notifier(t, w)
            with self._guard:
                self._supervisors[w.name] = s
        return s

    def known_supervisor(self, name: str) -> Supervisor | None:
        """The worker's supervisor if this command already has it (no round trip), else None."""
        with self._guard:
            return self._supervisors.get(name)

    def _install_notifier(self, t: Transport, w: WorkerConfig) -> None:
        """systemd's OnFailure= names a template unit that must exist for the master; install it
        (idempotent) the first time this command meets the worker. A failure only costs the
        alarm, so it is reported and the dispatch goes on (D5)."""
        from fleet.transport import TransportError
        from fleet.units.systemd import notifier_install_command

        try:
            res = t.run(notifier_install_command(w.python), timeout=30)
        except (TransportError, ValueError) as exc:
            self.warn(f"fleet: warning: {w.name}: OnFailure notifier not installed: {exc}")
            return
        if not res.ok:
            self.warn(
                f"fleet: warning: {w.name}: OnFailure notifier not installed "
                f"(exit {res.exit}): {res.stderr.strip()[-200:]}"
            )

    def forget(self, name: str) -> None:
        """Drop a worker's transport after a failure, so the next call reconnects."""
        with self._guard:
            t = self._transports.pop(name, None)
            self._supervisors.pop(name, None)
        if t is not None:
            try:
                t.close()
            except Exception:  # closing a broken connection has nothing to report
                pass

    def close(self) -> None:
        for name in list(self._transports):
            self.forget(name)

    def __enter__(self) -> FleetContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
