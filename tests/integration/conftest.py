"""Fixtures every integration module shares: one real local fleet per test, and a closed port."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_dispatch import Fleet, make_fleet


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A real SQLite board, a real origin and one local worker under the portable supervisor."""
    f = make_fleet(tmp_path)
    try:
        yield f
    finally:
        f.ctx.close()


def closed_port() -> int:
    """A port nobody listens on (free a moment ago): an SSH worker that cannot be reached."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
