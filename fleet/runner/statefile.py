"""The files a run reads back (the agent's results file, the worker's capacity file): no file is
an answer, a file that cannot be read is a warning, never a crash (D5)."""

from __future__ import annotations

from pathlib import Path


def read_state_file(path: Path) -> tuple[str | None, str | None]:
    """(text, None); (None, None) when there is no file; (None, why) when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8"), None
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as err:
        return None, str(err)
