"""GitHub's schema, kept in the repository (tests/fixtures/github/schema/), and a checker: does an answer have exactly the fields
its GraphQL document asked for?

The checker walks the document's selection sets against the schema — aliases, fragment spreads,
inline fragments on unions and interfaces (resolved by the answer's ``__typename``) — and reports
every key that is missing or extra, every null in a non-null field, and every scalar of the wrong
JSON type. It runs on every recorded fixture and on every answer the replayer produces.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLEnumType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    TypeMetaFieldDef,
    build_schema,
    is_abstract_type,
    parse,
)

# GitHub's published schema, in the repository (its source and date: the directory's README.md).
# A missing file is a failure of every test that needs it, never a skip.
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "schema"
SCHEMA_PATH = SCHEMA_DIR / "github-2026-03.graphql"  # GitHub.com: what the board is written for
OLDER_SCHEMA_PATH = SCHEMA_DIR / "github-pre-2025-04.graphql"  # an older server (GHES)

_SCALARS: dict[str, tuple[type, ...]] = {
    "Int": (int,),
    "Float": (int, float),
    "Boolean": (bool,),
    "String": (str,),
    "ID": (str,),
}


@functools.cache
def schema(path: Path = SCHEMA_PATH) -> GraphQLSchema:
    """GitHub's schema, built once per test session (building it takes about two seconds)."""
    if not path.is_file():
        raise FileNotFoundError(f"GitHub's published schema is missing from the repository: {path}")
    return build_schema(path.read_text(encoding="utf-8"))


def check(document: str, answer: Any) -> list[str]:
    """Every way ``answer`` (a whole response: ``data``/``errors``) differs from ``document``."""
    if not isinstance(answer, dict):
        return [f"answer is {type(answer).__name__}, not an object"]
    problems = [
        f"answer has unknown top-level key {k!r}" for k in answer if k not in ("data", "errors")
    ]
    for i, err in enumerate(answer.get("errors") or []):
        if not isinstance(err, dict) or not isinstance(err.get("message"), str):
            problems.append(f"errors[{i}] has no message")
    if answer.get("data") is None:
        return problems if "errors" in answer else [*problems, "answer has neither data nor errors"]
    doc = parse(document)
    fragments = {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}
    (op,) = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    sch = schema()
    root = sch.mutation_type if op.operation.value == "mutation" else sch.query_type
    assert root is not None
    _object(root, [op.selection_set], answer["data"], "data", fragments, problems)
    return problems


def _applies(condition: str | None, runtime: Any, parent: Any) -> bool | None:
    """Whether a fragment on ``condition`` applies; None when the runtime type is unknown."""
    if condition is None or condition == parent.name:
        return True
    if runtime is None:
        return None
    if condition == runtime.name:
        return True
    cond = schema().type_map[condition]
    return is_abstract_type(cond) and schema().is_sub_type(cond, runtime)  # type: ignore[arg-type]


def _collect(sets, runtime, parent, fragments, where, problems) -> dict[str, list[FieldNode]]:
    fields: dict[str, list[FieldNode]] = {}
    for selection_set in sets:
        for sel in selection_set.selections:
            if isinstance(sel, FieldNode):
                key = sel.alias.value if sel.alias else sel.name.value
                fields.setdefault(key, []).append(sel)
                continue
            if isinstance(sel, FragmentSpreadNode):
                frag = fragments[sel.name.value]
                cond, inner = frag.type_condition.name.value, frag.selection_set
            elif isinstance(sel, InlineFragmentNode):
                cond = sel.type_condition.name.value if sel.type_condition else None
                inner = sel.selection_set
            else:
                continue
            applies = _applies(cond, runtime, parent)
            if applies is None:
                problems.append(f"{where}: no __typename, cannot tell if '... on {cond}' applies")
            elif applies:
                for key, nodes in _collect(
                    [inner], runtime, parent, fragments, where, problems
                ).items():
                    fields.setdefault(key, []).extend(nodes)
    return fields


def _object(parent, sets, value, where, fragments, problems) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where}: expected an object, got {type(value).__name__}")
        return
    runtime = parent if isinstance(parent, GraphQLObjectType) else None
    if runtime is None and isinstance(value.get("__typename"), str):
        runtime = schema().type_map.get(value["__typename"])
        if runtime is None or not schema().is_sub_type(parent, runtime):
            problems.append(f"{where}: __typename {value['__typename']!r} is not a {parent.name}")
            return
    fields = _collect(sets, runtime, parent, fragments, where, problems)
    for key in fields.keys() - value.keys():
        problems.append(f"{where}: missing {key!r}")
    for key in value.keys() - fields.keys():
        problems.append(f"{where}: {key!r} was not asked for")
    owner = runtime or parent
    for key, nodes in fields.items():
        if key not in value:
            continue
        name = nodes[0].name.value
        if name == "__typename":
            if runtime is not None and value[key] != runtime.name:
                problems.append(f"{where}.{key}: {value[key]!r} is not {runtime.name!r}")
            continue
        definition = owner.fields.get(name)
        if definition is None and name == "__type" and owner is schema().query_type:
            definition = TypeMetaFieldDef  # introspection: the server's own description
        if definition is None:
            problems.append(f"{where}: {owner.name} has no field {name!r}")
            continue
        subsets = [n.selection_set for n in nodes if n.selection_set is not None]
        _value(definition.type, subsets, value[key], f"{where}.{key}", fragments, problems)


def _value(gtype, sets: list[SelectionSetNode], value, where, fragments, problems) -> None:
    if isinstance(gtype, GraphQLNonNull):
        if value is None:
            problems.append(f"{where}: null in a non-null field")
            return
        gtype = gtype.of_type
    if value is None:
        return
    if isinstance(gtype, GraphQLList):
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _value(gtype.of_type, sets, item, f"{where}[{i}]", fragments, problems)
        return
    if isinstance(gtype, GraphQLEnumType):
        if value not in gtype.values:
            problems.append(f"{where}: {value!r} is not a {gtype.name}")
        return
    if isinstance(gtype, GraphQLScalarType):
        ok = _SCALARS.get(gtype.name, (str, int))
        if not isinstance(value, ok) or (bool not in ok and isinstance(value, bool)):
            problems.append(f"{where}: {value!r} is not a {gtype.name}")
        return
    _object(gtype, sets, value, where, fragments, problems)
