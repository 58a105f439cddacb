"""YAML read into plain values that remember where they were written: the inventory's parser.

Every inventory error names ``file:line:column`` (``fleet/inventory.py``), so the parser must keep
the position of every key, value and list item. Each command starts by reading the inventory, so
it must also be cheap: this reads through PyYAML's libyaml parser when it is installed (C, well
under a millisecond for the committed file; the round-trip loader took tens of milliseconds and
its import as much again), else through the copy of PyYAML that invoke carries, which every
command has already imported. Only the parser's nodes are used: their values are built here.

The values follow YAML 1.2's core schema, as a round-trip ruamel.yaml loader reads them (the
inventory's edits still go through ruamel, ``fleet.inventory.add_worker``): ``yes``, ``no``,
``on`` and ``off`` are strings, ``017`` is seventeen, ``0o17`` is octal. Merge keys (``<<: *x``)
are merged; a merged key has no position of its own, so it points at the mapping it was merged
into. A key written twice in one mapping is an error at its second place, and so is an anchor
name defined twice. What a YAML 1.1 parser would read otherwise is refused where it stands: a
``%YAML`` directive other than 1.2, and the characters NEL, LS and PS, which 1.1 reads as line
breaks (a comment would end there) and 1.2 as text; so is any control character.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

try:  # PyYAML proper: its libyaml parser when built with it
    import yaml

    LIBYAML: bool = yaml.__with_libyaml__
except ImportError:  # invoke's own copy of PyYAML, pure Python
    from invoke.util import yaml

    # Its C parser, if any, is PyYAML's and would build PyYAML's node classes, not the copy's.
    LIBYAML = False

Position = tuple[int, int]  # 0-based (line, column)

_CORE = "tag:yaml.org,2002:"
STR, NULL, BOOL, INT, FLOAT = (_CORE + t for t in ("str", "null", "bool", "int", "float"))
TIMESTAMP, MERGE, SEQ, MAP = (_CORE + t for t in ("timestamp", "merge", "seq", "map"))


class YAMLFault(ValueError):
    """The text is not a YAML document this reader accepts, and where (0-based)."""

    def __init__(self, pos: Position, problem: str) -> None:
        super().__init__(f"{pos[0] + 1}:{pos[1] + 1}: {problem}")
        self.pos = pos
        self.problem = problem


class Map(dict[Any, Any]):
    """A mapping, where it starts, and where each of its own keys and values is written."""

    def __init__(self, pos: Position = (0, 0)) -> None:
        super().__init__()
        self.pos = pos
        self.at: dict[Any, tuple[Position, Position]] = {}  # key -> (its position, its value's)


class Seq(list[Any]):
    """A list, where it starts, and where each item is written."""

    def __init__(self, pos: Position = (0, 0)) -> None:
        super().__init__()
        self.pos = pos
        self.items_at: list[Position] = []


class _Resolver(yaml.resolver.BaseResolver):
    """YAML 1.2's core schema for plain scalars, with ruamel.yaml's patterns (its round-trip
    loader's default version), instead of PyYAML's YAML 1.1 ones."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {}


for _tag, _pattern, _first in (
    (BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (
        FLOAT,
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        "-+0123456789.",
    ),
    (
        INT,
        r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0o?[0-7_]+
        |[-+]?[0-9_]+
        |[-+]?0x[0-9a-fA-F_]+)$""",
        "-+0123456789",
    ),
    (MERGE, r"^(?:<<)$", "<"),
    (NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (
        TIMESTAMP,
        r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
        |[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
        (?:[Tt]|[\ \t]+)[0-9][0-9]?
        :[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
        (?:[\ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
        "0123456789",
    ),
):
    _Resolver.add_implicit_resolver(_tag, re.compile(_pattern, re.X), list(_first))

if LIBYAML:

    class _Composer(yaml.cyaml.CParser, _Resolver):
        def __init__(self, text: str) -> None:
            yaml.cyaml.CParser.__init__(self, text)
            _Resolver.__init__(self)

else:

    class _Composer(  # type: ignore[no-redef]
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        yaml.composer.Composer,
        _Resolver,
    ):
        def __init__(self, text: str) -> None:
            yaml.reader.Reader.__init__(self, text)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _Resolver.__init__(self)


# Characters a YAML 1.2 document may not hold (outside its printable set), and the three that
# YAML 1.1's parsers (libyaml, PyYAML) read as line breaks where 1.2 reads them as text: a comment
# would end at one and the rest of it become configuration. Both are refused where they stand.
_UNPRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
_BREAKS_1_1 = re.compile("[\x85\u2028\u2029]")
# A %YAML directive at a line's start: only 1.2 is read as 1.2 (a 1.1 document means other values).
_DIRECTIVE = re.compile(r"^%YAML[ \t]+(\S*)", re.MULTILINE)


def _where(text: str, index: int) -> Position:
    line = text.count("\n", 0, index)
    return line, index - (text.rfind("\n", 0, index) + 1)


def _refuse_what_1_1_reads_otherwise(text: str) -> None:
    bad = _UNPRINTABLE.search(text)
    if bad is not None:
        raise YAMLFault(_where(text, bad.start()), f"a control character {bad.group()!r}")
    brk = _BREAKS_1_1.search(text)
    if brk is not None:
        raise YAMLFault(
            _where(text, brk.start()),
            f"{brk.group()!r} is a line break to YAML 1.1 and text to 1.2: use a plain newline",
        )
    for directive in _DIRECTIVE.finditer(text):
        if directive.group(1) != "1.2":
            raise YAMLFault(
                _where(text, directive.start()),
                f"%YAML {directive.group(1)}: this file is read as YAML 1.2 only",
            )


def _said(exc: yaml.MarkedYAMLError) -> str:
    """The parser's words, with where its context began when that is another place."""
    context, mark, problem = exc.context, exc.context_mark, exc.problem
    if context and mark is not None and mark is not exc.problem_mark:
        context = f"{context} (at {mark.line + 1}:{mark.column + 1})"
    return ", ".join(part for part in (context, problem) if part) or "malformed YAML"


def load(text: str) -> Any:
    """The one document in ``text`` as :class:`Map`, :class:`Seq` and scalars (``None`` for an
    empty one). Raises :class:`YAMLFault` with the problem's position."""
    _refuse_what_1_1_reads_otherwise(text)
    composer = None
    try:
        composer = _Composer(text)
        node = composer.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = (mark.line, mark.column) if mark is not None else (0, 0)
        raise YAMLFault(pos, _said(exc)) from None
    except yaml.YAMLError as exc:
        raise YAMLFault((0, 0), str(exc)) from None
    finally:
        if composer is not None:
            composer.dispose()
    return None if node is None else _Builder().value(node)


def _pos(node: Any) -> Position:
    return (node.start_mark.line, node.start_mark.column)


class _Builder:
    """Values from composed nodes. A node reached twice (an alias) is built once, so an anchor
    that contains itself ends in a value that contains itself, not in endless recursion."""

    _BOOLS: ClassVar = {
        "true": True,
        "false": False,
        "yes": True,
        "no": False,
        "on": True,
        "off": False,
    }

    def __init__(self) -> None:
        self._built: dict[int, Any] = {}

    def value(self, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        done = self._built.get(id(node))
        if done is not None:
            return done
        if isinstance(node, yaml.SequenceNode) and node.tag == SEQ:
            return self._seq(node)
        if isinstance(node, yaml.MappingNode) and node.tag == MAP:
            return self._map(node)
        raise YAMLFault(_pos(node), f"unsupported tag {node.tag!r}")

    def _seq(self, node: Any) -> Seq:
        seq = self._built[id(node)] = Seq(_pos(node))
        for item in node.value:
            seq.append(self.value(item))
            seq.items_at.append(_pos(item))
        return seq

    def _map(self, node: Any) -> Map:
        out = self._built[id(node)] = Map(_pos(node))
        merged: list[Any] = []
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == MERGE:
                if merged:
                    raise YAMLFault(_pos(key_node), "found duplicate key '<<'")
                merged = self._merge_sources(value_node)
                continue
            key = self.value(key_node)
            if isinstance(key, dict | list):
                raise YAMLFault(_pos(key_node), "a mapping key must be a scalar")
            if key in out:
                first = out.at[key][0][0] + 1
                raise YAMLFault(
                    _pos(key_node), f"found duplicate key {key!r} (first at line {first})"
                )
            out[key] = self.value(value_node)
            out.at[key] = (_pos(key_node), _pos(value_node))
        # YAML's merge: the mapping's own keys win, then the first source that has the key.
        for source in merged:
            for key, value in source.items():
                if key not in out:
                    out[key] = value
        return out

    def _merge_sources(self, node: Any) -> list[Map]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        built = [self.value(s) for s in sources]
        for source, at in zip(built, sources, strict=True):
            if not isinstance(source, Map):
                raise YAMLFault(_pos(at), "a merge key ('<<') takes a mapping or a list of them")
        return built

    def _scalar(self, node: Any) -> Any:
        text: str = node.value
        tag = node.tag
        try:
            if tag == STR:
                return text
            if tag == NULL:
                return None
            if tag == BOOL:
                return self._BOOLS[text.lower()]
            if tag == INT:
                return _int(text)
            if tag == FLOAT:
                return _float(text)
            if tag == TIMESTAMP:
                return yaml.constructor.SafeConstructor().construct_yaml_timestamp(node)
        except (KeyError, ValueError, IndexError) as exc:
            raise YAMLFault(_pos(node), f"cannot read {text!r} as {tag}: {exc}") from None
        raise YAMLFault(_pos(node), f"unsupported tag {tag!r}")


def _int(text: str) -> int:
    """ruamel.yaml's YAML 1.2 integers: ``_`` separators, a sign, ``0b``/``0o``/``0x``, and a
    leading zero that is only a zero (``017`` is seventeen)."""
    digits = text.replace("_", "")
    sign = -1 if digits[0] == "-" else 1
    digits = digits.lstrip("+-")
    for prefix, base in (("0b", 2), ("0o", 8), ("0x", 16)):
        if digits.startswith(prefix):
            return sign * int(digits[2:], base)
    return sign * int(digits)


def _float(text: str) -> float:
    digits = text.replace("_", "").lower()
    sign = -1.0 if digits[0] == "-" else 1.0
    digits = digits.lstrip("+-")
    if digits == ".inf":
        return sign * float("inf")
    if digits == ".nan":
        return float("nan")
    return sign * float(digits)
