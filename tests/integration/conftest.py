"""Fixtures every integration module shares: one real local fleet per test (fleet_fixture.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.fleet_fixture import Fleet, make_fleet


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A real SQLite board, a real origin and one local worker under the portable supervisor."""
    f = make_fleet(tmp_path)
    try:
        yield f
    finally:
        f.ctx.close()
