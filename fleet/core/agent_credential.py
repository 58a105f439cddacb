"""Whose credential the agent holds: never the one that posts the fleet's markers (issue 16, D18).

Markers count only from the board's ``identity`` (fleet.core.markers): an agent holding that identity's
token can post a success, a release or a cancel the fleet would obey. The agent gets its own token
(``agent_token_file`` on the worker, passed as ``agent_token_env``); the runner withholds the
fleet's token from it, and ``invoke doctor`` fails when the two are one. Pure: callers read the
token files (``fleet.runner.agent_env.read_token``) and ask GitHub for logins.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CredentialVerdict:
    ok: bool
    reason: str  # "ok" | "no-agent-token" | "same-token" | "same-login"
    detail: str


def agent_credential_verdict(
    *,
    identity: str,
    fleet_token: str,
    agent_token: str | None,
    agent_login: str | None = None,
) -> CredentialVerdict:
    """Fail when the agent's token is the fleet's, or logs in as the fleet's identity."""
    if not agent_token:
        return CredentialVerdict(
            True,
            "no-agent-token",
            "no agent_token_file: the agent gets no GitHub token from fleet (the fleet's is withheld)",
        )
    if fleet_token and agent_token.strip() == fleet_token.strip():
        return CredentialVerdict(
            False, "same-token", "the agent's token IS the fleet's token: it could post markers"
        )
    if agent_login is not None and agent_login.casefold() == identity.casefold():
        return CredentialVerdict(
            False,
            "same-login",
            f"the agent's token logs in as {agent_login!r}, the board's identity: its comments "
            "would count as the fleet's markers",
        )
    return CredentialVerdict(True, "ok", "the agent holds its own credential")
