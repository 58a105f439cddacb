"""Integration tests: real SQLite, real git, real processes on this box."""
