"""The agent's environment: what the run hands the agent, and what it keeps from it (issue 16).

The agent is a model with a shell; a prompt injected through an issue can drive it. So its
environment carries what it needs for the work and nothing that lets it act as the fleet:

- no path to the board file, the origin or the inventory (``FLEET_BOARD_PATH``, ``FLEET_ORIGIN``,
  ``FLEET_INVENTORY`` are removed): on the embedded board the forge is reached through the run's
  gate (``FLEET_FORGE``, :mod:`fleet.runner.forge_gate`), which cannot post a marker;
- not the fleet's GitHub token: the board's ``token_env`` variable is removed, and so is every
  other variable holding the same value (an operator who exported it twice);
- the agent's own credential, when the worker names one (``agent_token_file``), under the variable
  its tools read (``agent_token_env``, default ``GH_TOKEN``: the GitHub CLI's).

Pure: the caller reads files and passes values.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

# What the runner's own environment may hold that leads to the board, never the agent's business.
WITHHELD = ("FLEET_INVENTORY", "FLEET_BOARD_PATH", "FLEET_ORIGIN")


def agent_env(
    base: Mapping[str, str],
    run: Mapping[str, str],
    *,
    withheld_names: Collection[str] = (),
    withheld_values: Collection[str] = (),
    credential: tuple[str, str] | None = None,
) -> dict[str, str]:
    """``base`` (the runner's environment) without what leads to the board or the fleet's identity,
    plus ``run`` (``FLEET_ISSUE`` and the rest) and the agent's own ``credential`` (name, value)."""
    names = {*WITHHELD, *withheld_names}
    secrets = {v for v in withheld_values if v}
    env = {k: v for k, v in base.items() if k not in names and v not in secrets}
    env.update(run)
    if credential is not None:
        name, value = credential
        if value and value not in secrets:
            env[name] = value
    return env


def read_token(path: str | None) -> str | None:
    """A token file's content, or None when unset, missing or unreadable."""
    if not path:
        return None
    try:
        return Path(path).expanduser().read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None
