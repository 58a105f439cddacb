"""The replayer's state: the recorded fixtures it answers from, and the objects it keeps."""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"


def fixture(name: str) -> dict[str, Any]:
    """A recorded shape (a fresh copy: the replayer writes its state into it)."""
    return copy.deepcopy(_fixture(name))


@functools.cache
def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def stamp(at: datetime) -> str:
    """GitHub's timestamp form: UTC, whole seconds, ``Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FakeIssue:
    number: int
    db_id: int
    title: str
    body: str
    author: str
    created_at: datetime
    state: str = "open"
    state_reason: str | None = None
    labels: list[str] = field(default_factory=list)
    assignees: list[str] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)  # id, author, body, at
    events: list[dict[str, Any]] = field(default_factory=list)  # type, at, actor, reason/label
    parent: int | None = None
    blocked_by: list[int] = field(default_factory=list)
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    item_id: str | None = None
    fields: dict[str, str] = field(default_factory=dict)  # project field name -> value
    association: str = "MEMBER"  # the author's authorAssociation, as GitHub computes it
    edited_at: datetime | None = None  # lastEditedAt: the body's last edit

    @property
    def node_id(self) -> str:
        return f"I_kwDOREPLAY{self.number:05d}"


@dataclass
class FakePR:
    number: int
    title: str
    body: str
    branch: str
    created_at: datetime
    repository: str
    closes: list[int]
    author: str = "fleet-bot"
    state: str = "OPEN"
    merged_at: datetime | None = None


@dataclass
class Thread:
    """A notification thread: GitHub keeps ONE per issue for a user. Its ``reason`` is why the
    user was first subscribed (here ``mention``) and stays so; every later comment by someone
    else makes it unread again; ``latest_comment_url`` names the issue's latest comment, whoever
    wrote it (rest_notifications.json's notes)."""

    id: int
    issue: int
    reason: str = "mention"
    unread: bool = True
