"""The Projects v2 board's own ids, and writes to its Status and Lane fields (GraphQL mutations).

Field and option ids are the board's configuration, not queue state, so one board instance reads
them once; the queue itself is never cached (D1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.board.base import BoardUnreadable, BoardWriteError
from fleet.board.github import parse as parse
from fleet.board.github import queries as q
from fleet.board.github.http import GitHubHTTP


@dataclass(frozen=True)
class ProjectField:
    id: str
    name: str
    data_type: str  # SINGLE_SELECT, TEXT, ...
    options: Mapping[str, str]  # option name -> option id (single-select only)


@dataclass(frozen=True)
class Project:
    id: str
    fields: Mapping[str, ProjectField]


def project_node(data: dict[str, Any], owner: str, number: int) -> dict[str, Any]:
    """``repositoryOwner.projectV2`` of an answer, or a clear error naming what is missing."""
    found = data.get("repositoryOwner")
    project = found.get("projectV2") if isinstance(found, dict) else None
    if not isinstance(project, dict):
        raise BoardUnreadable(f"no project {number} under {owner!r} (docs/github.md)")
    return project


def parse_project(node: dict[str, Any]) -> Project:
    fields = {}
    for f in parse.nodes(node.get("fields"), "fields"):
        if isinstance(f.get("name"), str) and isinstance(f.get("id"), str):
            opts = {o["name"]: o["id"] for o in f.get("options") or () if isinstance(o, dict)}
            fields[f["name"]] = ProjectField(f["id"], f["name"], str(f.get("dataType")), opts)
    return Project(id=parse.text(node.get("id"), "projectV2.id"), fields=fields)


def field_value(field: ProjectField, value: str) -> dict[str, str]:
    """The ``ProjectV2FieldValue`` input for ``value`` in ``field``; unknown options are refused
    with the options the board has, never created."""
    if field.data_type == "SINGLE_SELECT":
        if value not in field.options:
            have = sorted(field.options)
            raise BoardWriteError(f"field {field.name!r} has no option {value!r}; it has {have}")
        return {"singleSelectOptionId": field.options[value]}
    if field.data_type == "TEXT":
        return {"text": value}
    raise BoardWriteError(f"field {field.name!r} is {field.data_type}; use single select or text")


class ProjectFields:
    """Status and Lane of issues on one Projects v2 board."""

    def __init__(self, http: GitHubHTTP, owner: str, repo: str, number: int) -> None:
        self._http = http
        self.owner = owner
        self.repo = repo
        self.number = number
        self._project: Project | None = None

    def project(self) -> Project:
        """The board's ids. A read (retried on a 5xx like every read); a write that needs them
        turns its failure into :class:`BoardWriteError` (:meth:`_for_write`)."""
        if self._project is None:
            data = self._http.graphql(q.PROJECT, {"owner": self.owner, "project": self.number})
            self._project = parse_project(project_node(data, self.owner, self.number))
        return self._project

    def _for_write(self, what: str) -> Project:
        try:
            return self.project()
        except BoardUnreadable as exc:
            raise BoardWriteError(f"{what}: the board's fields could not be read: {exc}") from exc

    def field(self, name: str) -> ProjectField:
        found = self._for_write(f"field {name!r}").fields.get(name)
        if found is None:
            raise BoardWriteError(f"the board has no field {name!r} (docs/github.md)")
        return found

    def item_of(self, number: int) -> str:
        """The issue's item on this board, adding the issue to the board if it is not on it."""
        project = self._for_write(f"#{number}'s board item")
        variables = {"owner": self.owner, "name": self.repo, "number": number}
        try:  # a read (retried on a 5xx); its failure is the write's failure
            data = self._http.graphql(q.ISSUE_ITEM, variables)
            node = parse.obj(parse.obj(data.get("repository"), "repository").get("issue"), "issue")
        except BoardUnreadable as exc:
            raise BoardWriteError(f"#{number}'s board item could not be read: {exc}") from exc
        for item in parse.nodes(node.get("projectItems"), "projectItems"):
            if isinstance(item.get("project"), dict) and item["project"].get("id") == project.id:
                return parse.text(item.get("id"), "item.id")
        return self.add_item(parse.text(node.get("id"), "issue.id"))

    def add_item(self, content_id: str) -> str:
        variables = {"project": self._for_write("add to the board").id, "content": content_id}
        data = self._http.graphql(q.ADD_ITEM, variables, write=True)
        payload = parse.obj(data.get("addProjectV2ItemById"), "addProjectV2ItemById")
        return parse.text(parse.obj(payload.get("item"), "item").get("id"), "item.id")

    def set(self, item: str, name: str, value: str | None) -> None:
        """Set field ``name`` of ``item`` to ``value``; None clears it."""
        field = self.field(name)
        project = self._for_write(f"set {name!r}")
        variables: dict[str, Any] = {"project": project.id, "item": item, "field": field.id}
        if value is None:
            self._http.graphql(q.CLEAR_FIELD, variables, write=True)
        else:
            variables["value"] = field_value(field, value)
            self._http.graphql(q.SET_FIELD, variables, write=True)
