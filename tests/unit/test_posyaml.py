"""fleet.posyaml reads what ruamel.yaml's round-trip loader read before it, at the same places.

The inventory was parsed by ruamel.yaml (YAML 1.2, positions from its comment attributes) and is
now parsed by libyaml through :mod:`fleet.posyaml`; ruamel still edits the file (``add_worker``).
So ruamel is the reference here: the same values, the same position for every key, value and item.
"""

from __future__ import annotations

import importlib.util
import io
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from fleet import posyaml

REPO = Path(__file__).resolve().parents[2]


def ruamel(text: str) -> Any:
    return YAML(typ="rt").load(io.StringIO(text))


def same_values(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, CommentedMap):
        return (
            isinstance(ours, posyaml.Map)
            and list(ours) == list(theirs)
            and all(same_values(ours[k], theirs[k]) for k in theirs)
        )
    if isinstance(theirs, CommentedSeq):
        return (
            isinstance(ours, posyaml.Seq)
            and len(ours) == len(theirs)
            and all(same_values(a, b) for a, b in zip(ours, theirs, strict=True))
        )
    if isinstance(theirs, float) and math.isnan(theirs):
        return isinstance(ours, float) and math.isnan(ours)
    # ruamel's scalar types subclass str, int, float and bool: compare as the plain type.
    plain = (bool, int, float, str, type(None))
    kind = next((t for t in plain if isinstance(theirs, t)), type(theirs))
    return type(ours) is kind and ours == theirs


def same_places(ours: Any, theirs: Any) -> list[str]:
    """Every position ruamel records that ours does not match, as readable lines."""
    wrong: list[str] = []
    if isinstance(theirs, CommentedMap):
        assert ours.pos == (theirs.lc.line, theirs.lc.col)
        for key, (kl, kc, vl, vc) in (theirs.lc.data or {}).items():
            if ours.at.get(key) != ((kl, kc), (vl, vc)):
                wrong.append(f"{key!r}: ours {ours.at.get(key)}, ruamel {(kl, kc), (vl, vc)}")
            wrong += same_places(ours[key], theirs[key])
    elif isinstance(theirs, CommentedSeq):
        for i, item in enumerate(theirs):
            if ours.items_at[i] != theirs.lc.item(i):
                wrong.append(f"[{i}]: ours {ours.items_at[i]}, ruamel {theirs.lc.item(i)}")
            wrong += same_places(ours[i], item)
    return wrong


DOCS = {
    "committed": (REPO / "inventory.yaml").read_text(encoding="utf-8"),
    "flow and block": textwrap.dedent(
        """\
        # a comment first
        board: {kind: local, path: b.sqlite3}
        lock:
          path: l   # trailing comment
          wait_s: 2.5
        workers:
          - {name: a, transport: ssh, host: h, master: m, path_prefix: [/x, "/y z"]}
          -   name: b
              port: 0o17
          - name: c
            agent: >
              folded text
            python: |
              literal
        """
    ),
    "anchors": "x: &a {n: 1}\ny: *a\nz: [&s hello, *s]\n",
}


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_same_values_at_the_same_places_as_ruamel(name: str) -> None:
    text = DOCS[name]
    ours, theirs = posyaml.load(text), ruamel(text)
    assert same_values(ours, theirs)
    assert same_places(ours, theirs) == []


# YAML 1.1 and 1.2 read these differently; PyYAML's own loader reads them as 1.1.
TRICKY = (
    *[
        "yes",
        "no",
        "on",
        "off",
        "y",
        "n",
        "Yes",
        "NO",
        "true",
        "False",
        "TRUE",
        "~",
        "null",
        "Null",
    ],
    *[
        "0",
        "017",
        "0o17",
        "0x1F",
        "0b101",
        "1_000",
        "-5",
        "+5",
        "1.5",
        "1e3",
        "1.0e+3",
        ".5",
        "-.inf",
        ".NaN",
        "0.1_0",
    ],
    "2024-01-01",
    "'quoted'",
    '"017"',
    "",
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(TRICKY),
            st.from_regex(r"[A-Za-z0-9_.+-]{1,8}", fullmatch=True),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_plain_scalars_read_as_yaml_1_2_like_ruamel(words: list[str]) -> None:
    text = "".join(f"k{i}: {w}\n" for i, w in enumerate(words))
    try:
        theirs = ruamel(text)
    except Exception:  # ruamel refuses it: so must we
        with pytest.raises(posyaml.YAMLFault):
            posyaml.load(text)
        return
    assert same_values(posyaml.load(text), theirs), text


def test_merged_keys_yield_to_the_mapping_and_have_no_place_of_their_own() -> None:
    doc = posyaml.load("b: &b {n: 1, m: 2}\nc: &c {m: 3, o: 4}\nd:\n  <<: [*b, *c]\n  n: 5\n")
    assert dict(doc["d"]) == {"n": 5, "m": 2, "o": 4}
    assert set(doc["d"].at) == {"n"}


@pytest.mark.parametrize(
    ("text", "pos", "words"),
    [
        ("a: 1\na: 2\n", (1, 0), "duplicate key 'a'"),
        ("a: [1\n", (1, 0), "expected ',' or ']'"),
        ("a: !x 1\n", (0, 3), "unsupported tag"),
        ("a: !!int x\n", (0, 3), "cannot read 'x'"),
        ("? [k]\n: 1\n", (0, 2), "key must be a scalar"),
        ("a: 1\n---\nb: 2\n", (1, 0), "single document"),
        # what a YAML 1.1 parser would read otherwise, refused where it stands
        ("a: 1\nb: \x07\n", (1, 3), "control character"),
        ("a: \u00e9\u00e9\U0001f600\nb: \x1b\n", (1, 3), "control character"),
        ("lock:\n  path: l  # was:\u2028  wait_s: 99\n", (1, 17), "line break to YAML 1.1"),
        ("a: b\x85c\n", (0, 4), "line break to YAML 1.1"),
        ("a: 1\n# \u2029\n", (1, 2), "line break to YAML 1.1"),
        ("%YAML 1.1\n---\na: yes\n", (0, 0), "read as YAML 1.2 only"),
        ("a: &x 1\nb: &x 2\n", (1, 3), "duplicate anchor; first occurrence (at 1:4)"),
    ],
)
def test_a_document_it_refuses_is_refused_at_a_place(
    text: str, pos: tuple[int, int], words: str
) -> None:
    with pytest.raises(posyaml.YAMLFault) as caught:
        posyaml.load(text)
    assert caught.value.pos == pos and words in caught.value.problem


def test_a_yaml_1_2_directive_is_read() -> None:
    assert posyaml.load("%YAML 1.2\n---\na: yes\n") == {"a": "yes"}


def test_an_alias_to_its_own_anchor_ends() -> None:
    doc = posyaml.load("a: &x [1, *x]\n")
    assert doc["a"][1] is doc["a"]


def _places(doc: Any) -> list[object]:
    """Every position a document read by posyaml records, in order."""
    if isinstance(doc, dict):
        return [doc.pos, *((k, doc.at.get(k), *_places(v)) for k, v in doc.items())]  # type: ignore[attr-defined]
    if isinstance(doc, list):
        return [doc.pos, doc.items_at, *(p for v in doc for p in _places(v))]  # type: ignore[attr-defined]
    return []


def test_without_pyyaml_invokes_copy_reads_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A box without PyYAML (a worker's runner venv) parses with the pure-Python copy invoke
    carries: the same values at the same places, the same refusals."""
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` now raises ImportError
    spec = importlib.util.find_spec("fleet.posyaml")
    assert spec is not None and spec.loader is not None
    pure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pure)
    assert pure.yaml.__name__ != "yaml" and not pure.LIBYAML
    for text in DOCS.values():
        ours, theirs = pure.load(text), posyaml.load(text)
        assert ours == theirs and _places(ours) == _places(theirs)
    for text, pos in (("a: 1\na: 2\n", (1, 0)), ("a: 1\n\x07b: 2\n", (1, 0))):
        with pytest.raises(pure.YAMLFault) as caught:
            pure.load(text)
        assert caught.value.pos == pos
