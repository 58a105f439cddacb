"""The journal: one JSON object per line, appended as each step happens (seed 000: the trace is
the run). A sweep records the snapshot that produced its plan and the plan itself, so ``invoke
replay`` can hand the snapshot back to the pure decision and compare (seed 001 §9)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime
from enum import Enum
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Frozen dataclasses, enums, datetimes and tuples as plain JSON (the inverse is codec.py)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    return value


class Trace:
    """Append-only JSONL; each line is written with one ``write`` on an O_APPEND file, so lines
    from concurrent processes do not interleave."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    def event(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        record = {"at": datetime.now(UTC).isoformat(), "event": kind, **to_jsonable(fields)}
        line = json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)


class TraceError(ValueError):
    """A trace that cannot be read back: ``line`` is 1-based, or None for the whole file."""

    def __init__(self, path: Path | str, line: int | None, why: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {why}")
        self.path, self.line, self.why = str(path), line, why


def iter_trace(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each record with its line number; blank lines are skipped, anything else that is not one
    JSON object is a :class:`TraceError` naming the file and the line."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; an open error must name the path)
    except OSError as exc:
        raise TraceError(path, None, f"cannot open: {exc.strerror or exc}") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise TraceError(path, n, f"not UTF-8: {exc.reason}") from None
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise TraceError(path, n, f"not a JSON line: {exc}") from None
            if not isinstance(record, dict):
                raise TraceError(path, n, f"not a JSON object: {line[:60]!r}")
            yield n, record


def read_trace(path: Path) -> list[dict[str, Any]]:
    return [record for _n, record in iter_trace(path)]
