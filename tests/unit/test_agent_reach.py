"""The agent's reach, pure parts: its environment, the forge gate's answers, the merge proof."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.board.base import BoardWriteError
from fleet.core.model import PRState, PullRequest
from fleet.runner.agent_env import agent_env
from fleet.runner.forge_gate import ForgeGate
from fleet.runner.merge_proof import Facts, claimed, unproven_merges, why_unproven

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _pr(number: int = 1, *, commit: str | None = "a" * 40, **kw: object) -> PullRequest:
    fields: dict[str, object] = dict(
        number=number,
        title="t",
        body=f"Closes #{number}",
        branch="b",
        state=PRState.MERGED,
        merged=True,
        created_at=T0 + timedelta(seconds=1),
        merge_commit=commit,
    )
    fields.update(kw)
    return PullRequest(**fields)  # type: ignore[arg-type]


# -- the agent's environment -----------------------------------------------------------------------


def test_the_agent_gets_no_board_path_and_not_the_fleet_token_under_any_name() -> None:
    base = {
        "PATH": "/usr/bin",
        "FLEET_INVENTORY": "/etc/fleet/inventory.yaml",
        "FLEET_BOARD_PATH": "/srv/board.sqlite3",
        "FLEET_ORIGIN": "/srv/origin.git",
        "GITHUB_TOKEN": "ghp_fleet",
        "GH_TOKEN": "ghp_fleet",  # the same secret exported twice
        "ANTHROPIC_API_KEY": "sk-agent",
    }
    env = agent_env(
        base,
        {"FLEET_ISSUE": "7"},
        withheld_names={"GITHUB_TOKEN"},
        withheld_values={"ghp_fleet", ""},
        credential=("GH_TOKEN", "ghp_agent"),
    )
    assert env == {
        "PATH": "/usr/bin",
        "ANTHROPIC_API_KEY": "sk-agent",
        "FLEET_ISSUE": "7",
        "GH_TOKEN": "ghp_agent",
    }


def test_an_agent_credential_equal_to_the_fleet_token_is_not_handed_over() -> None:
    env = agent_env({}, {}, withheld_values={"ghp_fleet"}, credential=("GH_TOKEN", "ghp_fleet"))
    assert "GH_TOKEN" not in env


# -- the gate's answers ------------------------------------------------------------------------------


class _Forge:
    def __init__(self) -> None:
        self.merged: list[int] = []

    def issue(self, number: int) -> None:
        return None

    def create_pr(self, branch: str, title: str, body: str, **kw: object) -> PullRequest:
        return _pr(41, state=PRState.OPEN, merged=False, commit=None, author=str(kw["author"]))

    def merge_pr(self, number: int, **kw: object) -> PullRequest:
        self.merged.append(number)
        return _pr(number)

    def pull_request(self, number: int) -> PullRequest | None:
        raise BoardWriteError("boom")


def _ask(gate: ForgeGate, **req: object) -> dict:
    return json.loads(gate.answer(json.dumps(req).encode()))


def test_the_gate_merges_only_what_this_run_opened_and_authors_it_itself() -> None:
    forge = _Forge()
    gate = ForgeGate(forge, 7, "agent")  # type: ignore[arg-type]
    refused = _ask(gate, op="merge_pr", number=3)
    assert not refused["ok"] and "not opened by this run" in refused["error"]
    opened = _ask(gate, op="create_pr", branch="b", title="t", body="x", author="fleet")
    assert opened["ok"] and opened["result"]["author"] == "agent"
    assert _ask(gate, op="merge_pr", number=41)["ok"] and forge.merged == [41]
    assert _ask(gate, op="pull_request", number=41) == {"ok": False, "error": "boom"}


@pytest.mark.parametrize(
    "req",
    [
        {"op": "comment", "body": "✔ fleet:success"},
        {"op": "create_pr", "branch": 1, "title": "t", "body": "b"},
        {"op": "merge_pr", "number": True},
        {"nop": 1},
    ],
)
def test_the_gate_refuses_anything_else_by_name(req: dict) -> None:
    answer = _ask(ForgeGate(_Forge(), 7, "agent"), **req)  # type: ignore[arg-type]
    assert answer["ok"] is False and answer["error"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_no_request_escapes_the_gate_as_a_crash(raw: bytes) -> None:
    answer = json.loads(ForgeGate(_Forge(), 7, "agent").answer(raw))  # type: ignore[arg-type]
    assert set(answer) in ({"ok", "result"}, {"ok", "error"})


# -- the merge proof ---------------------------------------------------------------------------------

PROOFS = [
    (None, Facts(True, True, False), "names no merge commit"),
    ("a" * 40, Facts(False, False, False), "is not in origin"),
    ("a" * 40, Facts(True, False, False), "not reachable from origin main"),
    ("a" * 40, Facts(True, True, True), "main did not move"),
    ("a" * 40, Facts(True, True, False), None),
]


@pytest.mark.parametrize(("commit", "facts", "why"), PROOFS)
def test_a_merge_is_proven_only_by_main_moving_to_it(commit, facts, why) -> None:
    got = why_unproven(_pr(commit=commit), facts)
    assert (got is None) if why is None else (why in (got or ""))


def test_only_this_runs_merged_prs_of_our_repository_are_checked() -> None:
    prs = [
        _pr(1),
        _pr(2, created_at=T0 - timedelta(seconds=1)),  # an earlier run's (D16)
        _pr(3, repository="other/repo"),  # cannot close ours: cross-repo, never a success
        _pr(4, state=PRState.OPEN, merged=False),
    ]
    assert [p.number for p in claimed(prs, T0)] == [1]
    asked: list[str] = []

    def ask(origin, commit, base):
        asked.append(commit)
        return Facts(True, True, True)

    out = unproven_merges(prs, started=T0, origin=None, base="b" * 40, ask=ask)  # type: ignore[arg-type]
    assert list(out) == [1] and asked == ["a" * 40]
