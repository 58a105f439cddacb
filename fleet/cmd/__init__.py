"""Command implementations behind the thin invoke tasks in ``tasks.py`` (I/O shell, no decisions)."""
