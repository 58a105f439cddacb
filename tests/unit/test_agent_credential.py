"""The agent's credential is never the fleet's (fleet.core.agent_credential): the doctor's decision."""

from __future__ import annotations

import pytest

from fleet.core.agent_credential import agent_credential_verdict

CASES = [
    ("ghp_fleet", "ghp_fleet", None, False, "same-token"),
    ("ghp_fleet", " ghp_fleet\n", None, False, "same-token"),
    ("ghp_fleet", "ghp_agent", "Fleet-Bot", False, "same-login"),  # logins compare without case
    ("ghp_fleet", "ghp_agent", "agent-bot", True, "ok"),
    ("ghp_fleet", "ghp_agent", None, True, "ok"),
    ("ghp_fleet", None, None, True, "no-agent-token"),
    ("", "ghp_agent", None, True, "ok"),
]


@pytest.mark.parametrize(("fleet", "agent", "login", "ok", "reason"), CASES)
def test_the_agent_never_holds_the_identity_that_posts_markers(fleet, agent, login, ok, reason):
    v = agent_credential_verdict(
        identity="fleet-bot", fleet_token=fleet, agent_token=agent, agent_login=login
    )
    assert (v.ok, v.reason) == (ok, reason)
