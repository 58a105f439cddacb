"""What the GitHub server's schema offers (#11 item 7), asked once per board instance. Pure parts:
the parse and the warnings; the board makes the one call.

GitHub.com has every feature the board uses. A GitHub Enterprise Server release may predate issue
dependencies (``Issue.blockedBy``, ``issueDependenciesSummary``) and the project items filter
(``ProjectV2.items(query:)``); sending those fields there fails every read. The board degrades
instead, and says so by name: without dependencies predicate 4 and check 5 see no blockers; without
the filter every item is read (closed and Done ones too), so a cycle costs the whole board.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse


@dataclass(frozen=True)
class ServerFeatures:
    dependencies: bool  # Issue.blockedBy and issueDependenciesSummary
    items_filter: bool  # ProjectV2.items(query:)


GITHUB_COM = ServerFeatures(dependencies=True, items_filter=True)
GITHUB_COM_HOSTS = frozenset({"api.github.com"})


def is_github_com(api_url: str) -> bool:
    return (urlparse(api_url).hostname or "").lower() in GITHUB_COM_HOSTS


def parse_features(data: dict[str, Any]) -> ServerFeatures:
    """The FEATURES document's answer (two ``__type`` introspections) as features."""
    issue_data, project_data = data.get("issue"), data.get("project")
    issue = issue_data if isinstance(issue_data, dict) else {}
    project = project_data if isinstance(project_data, dict) else {}
    issue_fields = {f.get("name") for f in issue.get("fields") or () if isinstance(f, dict)}
    items_args: set[Any] = set()
    for f in project.get("fields") or ():
        if isinstance(f, dict) and f.get("name") == "items":
            items_args = {a.get("name") for a in f.get("args") or () if isinstance(a, dict)}
    return ServerFeatures(
        dependencies={"blockedBy", "issueDependenciesSummary"} <= issue_fields,
        items_filter="query" in items_args,
    )


def warnings(features: ServerFeatures, api_url: str) -> list[str]:
    """One named warning per missing feature (D20), with what it costs the fleet."""
    out = []
    if not features.dependencies:
        out.append(
            f"github-no-dependencies: {api_url} has no issue dependencies; predicate 4 and "
            "check 5 see no blockers, so hold blocked work with a hold label instead"
        )
    if not features.items_filter:
        out.append(
            f"github-no-items-filter: {api_url} cannot filter project items; every item is "
            "read each cycle, Done and closed ones too (archive them to keep the cost down)"
        )
    return out
