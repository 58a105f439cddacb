"""The inventory's ``trust:`` block: defaults per board, positioned errors, case-folded logins."""

from __future__ import annotations

import pytest

from fleet.core.trust import DEFAULT_ASSOCIATIONS
from fleet.inventory import InventoryError, loads

WORKERS = "workers: [{name: w1}]\n"
GITHUB = "board: {kind: github, owner: o, repo: r, project_number: 1, identity: fleet-bot}\n"


def test_the_embedded_default_trusts_everyone_and_github_counts_write_access() -> None:
    local = loads(WORKERS).policy.trust
    assert (local.allow, local.associations, local.agent_logins) == (None, None, ())
    gh = loads(GITHUB + WORKERS).policy.trust
    assert gh.allow == () and set(gh.associations or ()) == set(DEFAULT_ASSOCIATIONS)


def test_logins_are_case_folded_and_the_block_reaches_the_policy() -> None:
    text = GITHUB + WORKERS + "trust:\n  allow: [Alice]\n  agent_logins: [Bot-Agent]\n"
    trust = loads(text).policy.trust
    assert trust.allow == ("alice",) and trust.agent_logins == ("bot-agent",)
    assert trust.trusts("ALICE", "NONE") and not trust.trusts("bot-agent", "OWNER")
    assert loads(WORKERS + "trust: {allow: []}\n").policy.trust.allow == ()


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        (WORKERS + "trust: {associations: [OWNER]}\n", "inv.yaml:2:9:", "embedded board"),
        (WORKERS + "trust: {allow: [a, '']}\n", "inv.yaml:2:20:", "trust.allow[1]"),
        (WORKERS + "trust: {alow: [a]}\n", "inv.yaml:2:9:", "unknown key 'alow' in trust"),
        (WORKERS + "trust: [a]\n", "inv.yaml:2:8:", "trust: expected a mapping"),
        (
            GITHUB + WORKERS + "trust:\n  associations: [OWNER, WRITER]\n",
            "inv.yaml:4:25:",
            "WRITER",
        ),
        (WORKERS + "trust: {agent_logins: x}\n", "inv.yaml:2:23:", "trust.agent_logins"),
        (
            GITHUB + WORKERS + "trust: {agent_logins: [a, Fleet-Bot]}\n",
            "inv.yaml:3:27:",
            "identity",
        ),
    ],
)
def test_a_bad_trust_block_is_an_error_at_its_position(text: str, where: str, says: str) -> None:
    with pytest.raises(InventoryError) as err:
        loads(text, "inv.yaml")
    assert str(err.value).startswith(where) and says in str(err.value), str(err.value)
