"""Which remote a worker's clone may fetch from (fleet.core.origin): pure, checked on plain values."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.origin import (
    AcceptedOrigins,
    foreign,
    github_host,
    origin_accepted,
    remote_origins,
    target_origins,
)
from fleet.inventory import BoardConfig, GitHubConfig


def _github(api_url: str = "https://api.github.com") -> BoardConfig:
    gh = GitHubConfig(owner="Acme", repo="Widgets", project_number=1, api_url=api_url)
    return BoardConfig("github", None, None, "fleet-bot", gh)


@pytest.mark.parametrize(
    ("api", "host"),
    [
        ("https://api.github.com", "github.com"),
        ("https://ghe.example.com/api/v3", "ghe.example.com"),
        ("https://GHE.Example.com:8443/api/v3", "ghe.example.com"),
    ],
)
def test_the_git_host_of_an_api(api: str, host: str) -> None:
    assert github_host(api) == host


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/widgets",
        "https://github.com/Acme/Widgets.git",
        "git@github.com:acme/widgets.git",
        "ssh://git@github.com/ACME/widgets",
    ],
)
def test_every_spelling_of_the_board_repository_is_accepted(url: str) -> None:
    assert origin_accepted(url, target_origins(_github()))


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/attacker/widgets",
        "https://evil.example/acme/widgets",
        "https://github.com/acme/widgets-fork",
        "/tmp/evil.git",
        "",
    ],
)
def test_any_other_remote_is_foreign(url: str) -> None:
    accept = target_origins(_github())
    assert not origin_accepted(url, accept)
    assert foreign(["https://github.com/acme/widgets", url], accept) == url


def test_a_local_origin_is_compared_byte_for_byte() -> None:
    board = BoardConfig("local", Path("/b.db"), Path("/srv/origin.git"), "fleet", None)
    accept = target_origins(board)
    assert origin_accepted("/srv/origin.git", accept)
    assert not origin_accepted("/srv/Origin.git", accept)  # another directory on Linux
    assert foreign(["/srv/origin.git", "/srv/origin.git"], accept) is None


def test_nothing_configured_is_named_unknown() -> None:
    assert not remote_origins(None).known and remote_origins("/r.git").known
    assert AcceptedOrigins().describe() == "(none configured)"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_only_a_listed_remote_is_accepted(url: str) -> None:
    exact = AcceptedOrigins(exact=("/srv/origin.git",))
    assert origin_accepted(url, exact) is (url.strip() == "/srv/origin.git")
    folded = target_origins(_github())
    assert origin_accepted(url, folded) is (url.strip().lower() in folded.folded)
