"""``invoke doctor``'s agent-credential check (issue 16): the agent must not hold the token that
posts the fleet's markers. The decision is :func:`fleet.core.agent_credential.agent_credential_verdict`;
this reads the two tokens where the doctor can (the board's from its variable or file, each local
worker's ``agent_token_file``) and names what it could not read."""

from __future__ import annotations

import os
from collections.abc import Iterator

from fleet.context import FleetContext
from fleet.core.agent_credential import agent_credential_verdict
from fleet.core.model import TransportKind
from fleet.doctor.checks import Options, register
from fleet.doctor.model import Finding, failed, passed
from fleet.runner.agent_env import read_token

FIX = (
    "give the agent its own token: a file on the worker named by the worker's agent_token_file, "
    "for a login that is not board.identity (docs/operations.md §8)"
)


@register("agent credential", needs_board=False)
def agent_credential(ctx: FleetContext, options: Options) -> Iterator[Finding]:
    gh = ctx.inventory.board.github
    if gh is None:
        yield passed("agent credential", "embedded board: markers need no token; none is handed on")
        return
    fleet_token = os.environ.get(gh.token_env, "") or read_token(gh.token_file) or ""
    for w in ctx.inventory.workers:
        name = f"worker {w.name}: agent credential"
        if w.agent_token_file and w.transport != TransportKind.LOCAL:
            yield passed(name, f"{w.agent_token_file} is on {w.host}: compare it there by hand")
            continue
        v = agent_credential_verdict(
            identity=ctx.inventory.board.identity,
            fleet_token=fleet_token,
            agent_token=read_token(w.agent_token_file),
        )
        yield passed(name, v.detail) if v.ok else failed(name, v.reason, v.detail, FIX)
