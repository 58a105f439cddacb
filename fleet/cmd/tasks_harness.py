"""invoke tasks for the Docker harness: the ``harness`` collection (``invoke harness.up`` ...)."""

from __future__ import annotations

from invoke import Collection

harness = Collection("harness")
