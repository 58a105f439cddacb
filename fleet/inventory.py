"""Load and validate ``inventory.yaml``: board, fleet lock, halt switches, policy and workers.

The inventory is the one place an operator writes down the fleet, so a mistake in it must stop the
program with a pointer, not change its behaviour: every error names ``file:line:column`` and the
shape that was expected, and an unknown key is an error at every level (a typo such as ``prot:``
for ``port:`` would otherwise silently fall back to a default). Every command reads the inventory
first, so it is parsed by :mod:`fleet.posyaml` (libyaml, the position of every key, value and item
kept); ruamel.yaml's round-trip loader is loaded only when :func:`add_worker` edits the file, and
keeps the operator's comments and key order.

Paths: relative paths on this box (board, lock, halt, state, and the clone/state/runner paths of a
*local* worker) resolve against the inventory file's directory, with ``~`` expanded and symlinks
left alone (D10 resolves a clone physically where it makes a worktree, not here). An *ssh*
worker's paths are remote paths and stay exactly as written; a relative one is relative to the
master's home, where a non-interactive ssh command starts.

The GitHub token is never read here: the inventory holds only the *name* of the environment
variable (``token_env``), so the credential (D18) never sits in a file, a trace or a log.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, overload

from fleet import posyaml
from fleet.agentkinds import AgentKind, detect_kind
from fleet.core.model import Policy, SupervisorKind, TransportKind
from fleet.core.trust import ASSOCIATIONS, DEFAULT_ASSOCIATIONS, Trust, fold
from fleet.posyaml import Map, Seq

if TYPE_CHECKING:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

ENV_VAR = "FLEET_INVENTORY"
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"  # worker names and lanes: safe in unit names, paths, shells
_NAME = re.compile(NAME_PATTERN)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GITHUB_OWNER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_GITHUB_REPO = re.compile(r"^[A-Za-z0-9._-]+$")
_URL = re.compile(r"^https?://\S+$")

TRANSPORTS = tuple(k.value for k in TransportKind)
SUPERVISORS = tuple(k.value for k in SupervisorKind)
BOARD_KINDS = ("local", "github")
AGENT_KINDS = tuple(k.value for k in AgentKind)  # fleet/agentkinds: one adapter per CLI

# Defaults. Each bounds a failure; the numbers and their sources are repeated in inventory.yaml.
# The policy numbers (attempt cap, backoffs, reaper threshold, timer period) live in fleet.core.model.
_POLICY = Policy()
DEFAULT_LOCK_WAIT_S = 30.0  # bounds how long a dispatcher queues behind another one's probe+launch
# (D4 layer 3); the seed fleet measured guard-to-launch at 26-27 s, so one whole dispatch fits.
# RuntimeMaxSec: bounds a hung agent holding task-<issue> (and so its issue) forever. Seed 003 says
# a run lasts "minutes to an hour"; an explicit guess until our run durations are measured.
DEFAULT_MAX_RUN_S = 3600
DEFAULT_SSH_PORT = 22  # sshd's standard port; bounds nothing
DEFAULT_PATH_PREFIX = ("~/.local/bin",)  # D3: `jq: command not found`, exit 127, in a unit's PATH
DEFAULT_AGENT = "python -m fleet.agents.demo"  # the stand-in agent, so a fresh checkout runs
DEFAULT_PYTHON = "python3"  # the worker's interpreter for the runner

# The keys each mapping may hold: anything else is a typo, and an error.
# fmt: off
TOP_KEYS = ("board", "lock", "halt", "policy", "state_dir", "workers", "trust")
TRUST_KEYS = ("allow", "associations", "agent_logins")
LOCAL_BOARD_KEYS = ("kind", "path", "origin", "identity")
GITHUB_BOARD_KEYS = ("kind", "owner", "repo", "project_number", "identity", "token_env", "token_file", "api_url",
                     "status_field", "lane_field")
LOCK_KEYS = ("path", "wait_s", "host")
HALT_KEYS = ("file", "issue_title")
POLICY_KEYS = ("hold_labels", "fixture_label", "do_not_dispatch", "attempt_cap", "capacity_cap", "retry_backoffs_s",
               "max_turns", "reaper_threshold_s", "timer_period_s", "max_run_s", "report_label")
WORKER_KEYS = ("name", "transport", "host", "port", "master", "lane", "clone", "runner_clone",
               "runner_remote", "path_prefix", "agent", "supervisor", "key", "known_hosts",
               "state_dir", "python", "max_run_s", "agent_kind", "agent_token_file", "agent_token_env")
# fmt: on


class InventoryError(ValueError):
    """The inventory cannot be used, and where: ``file:line:column: message`` (both 1-based)."""

    def __init__(self, file: str, line: int, column: int, message: str) -> None:
        super().__init__(f"{file}:{line}:{column}: {message}")
        self.file = file
        self.line = line
        self.column = column
        self.message = message


@dataclass(frozen=True)
class GitHubConfig:
    owner: str
    repo: str
    project_number: int
    token_env: str = "GITHUB_TOKEN"  # the variable's NAME; the value is read at call time only
    # Where a RUNNER reads the token when the variable is unset: a unit starts with a clean
    # environment, and passing the token on systemd-run's command line would publish it in the
    # process list and the unit's properties. A file on the worker, readable by its master only.
    token_file: str = "~/.config/fleet/github-token"
    api_url: str = "https://api.github.com"
    status_field: str = "Status"  # predicate 1 reads this single-select field, never a label
    lane_field: str = (
        "Lane"  # the project field that routes an item to a worker's lane (predicate 4)
    )


@dataclass(frozen=True)
class BoardConfig:
    kind: str  # "local" | "github"
    path: Path | None  # the SQLite board (local only)
    origin: Path | None  # the bare git origin the local forge merges into (local only)
    identity: str  # the author of this fleet's markers
    github: GitHubConfig | None


@dataclass(frozen=True)
class LockConfig:
    path: Path
    wait_s: float
    host: str | None  # name of an ssh worker whose host holds an flock over SSH; None = local file


@dataclass(frozen=True)
class HaltConfig:
    file: Path
    issue_title: str


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    transport: TransportKind
    host: str | None
    port: int
    master: str | None  # unix user; None = the current user (local only)
    lane: str
    clone: str  # clone of the TARGET repository; per-run worktrees come from it (D10)
    runner_clone: str | None  # a clone of fleet itself, synced before every run (D11)
    runner_remote: str | None  # where runner_clone syncs from (URL or path)
    path_prefix: tuple[str, ...]  # D3: prepended to PATH in every remote command and the unit
    agent: str
    supervisor: SupervisorKind  # AUTO: systemd where a user manager answers, else portable
    key: str | None
    known_hosts: str | None
    state_dir: str  # capacity file, portable units, worktrees, logs of this worker
    python: str
    max_run_s: int  # RuntimeMaxSec of every unit on this worker
    # Which adapter reads the agent's output (fleet/agentkinds); detected from ``agent`` when unset.
    agent_kind: AgentKind = AgentKind.CLAUDE
    # The agent's OWN credential for push/PR/merge: a private file on the worker, handed to the agent
    # as ``agent_token_env`` (the GitHub CLI reads GH_TOKEN). Never the board's token (issue 16).
    agent_token_file: str | None = None
    agent_token_env: str = "GH_TOKEN"


@dataclass(frozen=True)
class Inventory:
    path: Path
    board: BoardConfig
    lock: LockConfig
    halt: HaltConfig
    policy: Policy
    state_dir: Path  # trace, heartbeat, drain/pause flags
    workers: tuple[WorkerConfig, ...]
    # Positioned notices that change nothing but deserve a look (an agent kind guessed as plain).
    warnings: tuple[str, ...] = ()

    def worker(self, name: str) -> WorkerConfig | None:
        return next((w for w in self.workers if w.name == name), None)


# --- reading a mapping with positions -------------------------------------------------------------


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return repr(str(value))
    return repr(value)


@dataclass(frozen=True)
class _Node:
    """One mapping of the document, where it sits, and its dotted name for messages."""

    file: str
    where: str  # "" for the top level, else e.g. "workers[0]"
    data: Map
    pos: tuple[int, int]  # 0-based (line, column) of the mapping, for a missing key

    def fail(self, pos: tuple[int, int], message: str) -> NoReturn:
        raise InventoryError(self.file, pos[0] + 1, pos[1] + 1, message)

    def label(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def key_pos(self, key: object) -> tuple[int, int]:
        """Where ``key`` is written; a key merged in from an anchor (``<<: *x``) has no position
        of its own in this mapping, so the mapping's is used."""
        where = self.data.at.get(key)
        return where[0] if where else self.pos

    def value_pos(self, key: str) -> tuple[int, int]:
        where = self.data.at.get(key)
        return where[1] if where else self.pos

    def only(self, allowed: tuple[str, ...], hint: str = "") -> None:
        """Unknown keys are errors: a typo must not silently fall back to a default."""
        place = self.where or "the top level"
        for key in self.data:
            if not isinstance(key, str):
                self.fail(self.key_pos(key), f"{place}: expected string keys, got {_describe(key)}")
            if key not in allowed:
                self.fail(
                    self.key_pos(key),
                    f"unknown key {key!r} in {place}{hint} (expected one of: {', '.join(allowed)})",
                )

    def child(self, key: str, allowed: tuple[str, ...]) -> _Node:
        """A nested mapping; absent or null is an empty one (all defaults)."""
        value = self.data.get(key)
        if value is None:
            pos = self.key_pos(key) if key in self.data else self.pos
            return _Node(self.file, self.label(key), Map(pos), pos)
        if not isinstance(value, Map):
            self.fail(
                self.value_pos(key),
                f"{self.label(key)}: expected a mapping with keys {', '.join(allowed)}, "
                f"got {_describe(value)}",
            )
        return _Node(self.file, self.label(key), value, value.pos)

    def get(
        self,
        key: str,
        default: Any,
        shape: str,
        ok: Callable[[Any], bool],
        *,
        required: bool = False,
        nullable: bool = False,
    ) -> Any:
        if key not in self.data:
            if required:
                self.fail(
                    self.pos,
                    f"{self.where or 'the top level'}: missing key {key!r} (expected {shape})",
                )
            return default
        value = self.data[key]
        if value is None and nullable:
            return None
        if not ok(value):
            shape = f"{shape} or null" if nullable else shape
            self.fail(
                self.value_pos(key), f"{self.label(key)}: expected {shape}, got {_describe(value)}"
            )
        return str(value) if isinstance(value, str) else value

    def text(self, key: str, default: str | None, **kw: bool) -> Any:
        return self.get(key, default, "a non-empty string", _is_text, **kw)

    def name(self, key: str, default: str | None, **kw: bool) -> Any:
        return self.get(key, default, f"a name matching {NAME_PATTERN}", _matches(_NAME), **kw)

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        return self.get(key, default, f"one of: {', '.join(choices)}", lambda v: v in choices)

    def integer(self, key: str, default: int | None, lo: int = 1, hi: int | None = None) -> Any:
        shape = f"an integer {lo}-{hi}" if hi is not None else "a positive integer"
        ok = _is_int(lo, hi)
        return self.get(key, default, shape, ok, required=default is None)

    def seconds(self, key: str, default: float) -> float:
        def ok(v: object) -> bool:
            return isinstance(v, int | float) and not isinstance(v, bool) and v > 0

        return float(self.get(key, default, "a positive number of seconds", ok))

    def items(
        self,
        key: str,
        default: tuple[Any, ...],
        shape: str,
        ok: Callable[[Any], bool],
        *,
        empty: bool,
    ) -> tuple[Any, ...]:
        """A list whose every item passes ``ok``; a bad item is pointed at, not the list."""
        if key not in self.data:
            return default
        value = self.data[key]
        if not isinstance(value, Seq) or (not empty and len(value) == 0):
            self.fail(
                self.value_pos(key), f"{self.label(key)}: expected {shape}, got {_describe(value)}"
            )
        for i, item in enumerate(value):
            if not ok(item):
                self.fail(
                    value.items_at[i],
                    f"{self.label(key)}[{i}]: expected {shape}, got {_describe(item)}",
                )
        return tuple(str(v) if isinstance(v, str) else v for v in value)


def _is_text(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _matches(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda v: _is_text(v) and bool(pattern.fullmatch(str(v)))


def _is_int(lo: int, hi: int | None) -> Callable[[object], bool]:
    def ok(v: object) -> bool:
        in_range = isinstance(v, int) and v >= lo and (hi is None or v <= hi)
        return in_range and not isinstance(v, bool)

    return ok


def _local_path(text: str, base: Path) -> Path:
    """A path on this box: ``~`` expanded, relative to the inventory, absolute, symlinks kept."""
    return Path(os.path.abspath(os.path.join(base, os.path.expanduser(text))))


# --- sections -------------------------------------------------------------------------------------


def _board(top: _Node, base: Path) -> BoardConfig:
    node = top.child("board", LOCAL_BOARD_KEYS)
    kind = node.choice("kind", "local", BOARD_KINDS)
    if kind == "local":
        node.only(LOCAL_BOARD_KEYS, " for kind local")
        return BoardConfig(
            kind="local",
            path=_local_path(node.text("path", ".fleet/board.sqlite3"), base),
            origin=_local_path(node.text("origin", ".fleet/origin.git"), base),
            identity=node.text("identity", _POLICY.identity),
            github=None,
        )
    node.only(GITHUB_BOARD_KEYS, " for kind github")
    owner = node.get("owner", None, "a GitHub login", _matches(_GITHUB_OWNER), required=True)
    repo = node.get("repo", None, "a repository name alone", _matches(_GITHUB_REPO), required=True)
    github = GitHubConfig(
        owner=owner,
        repo=repo,
        project_number=node.integer("project_number", None),
        token_env=node.get("token_env", "GITHUB_TOKEN", "a variable NAME", _matches(_ENV_NAME)),
        token_file=node.text("token_file", "~/.config/fleet/github-token"),
        api_url=node.get("api_url", "https://api.github.com", "an http(s) URL", _matches(_URL)),
        status_field=node.text("status_field", "Status"),
        lane_field=node.text("lane_field", "Lane"),
    )
    # Required for github: markers are attributed by author, and the token's login is not ours to
    # guess (D18: the credential decides who the fleet is).
    identity = node.text("identity", None, required=True)
    return BoardConfig(kind="github", path=None, origin=None, identity=identity, github=github)


def _trust(top: _Node, board: BoardConfig) -> Trust:
    """Who gives the fleet work, steers it and speaks to its agents (docs/security.md). GitHub:
    the associations counted (default OWNER, MEMBER, COLLABORATOR) plus an allow list of logins.
    The embedded board has no associations; its allow list defaults to everyone."""
    node = top.child("trust", TRUST_KEYS)
    node.only(TRUST_KEYS)
    logins = "a list of logins (non-empty strings)"
    github = board.kind == "github"
    if not github and "associations" in node.data:
        node.fail(
            node.key_pos("associations"),
            "trust.associations: the embedded board records no GitHub associations "
            "(expected trust.allow, a list of logins, for board kind local)",
        )
    associations = node.items(
        "associations",
        DEFAULT_ASSOCIATIONS,
        f"a list of GitHub author associations ({', '.join(ASSOCIATIONS)})",
        lambda v: v in ASSOCIATIONS,
        empty=True,
    )
    # Absent: nobody extra on GitHub, everyone on the embedded board. Written, even empty: exactly
    # those logins.
    allow: tuple[str, ...] | None = node.items("allow", (), logins, _is_text, empty=True)
    if "allow" not in node.data and not github:
        allow = None
    agents = node.items("agent_logins", (), logins, _is_text, empty=True)
    for i, login in enumerate(agents):
        if fold(login) == fold(board.identity):
            node.fail(
                node.data["agent_logins"].items_at[i],
                f"trust.agent_logins[{i}]: {login!r} is the board's identity, the login that posts "
                "the fleet's markers (expected the agents' own logins: an agent holding the "
                "fleet's credential could write its own queue state)",
            )
    return Trust.of(
        allow=allow,
        associations=associations if github else None,
        agent_logins=agents,
    )


def _policy(top: _Node) -> tuple[_Node, dict[str, Any]]:
    node = top.child("policy", POLICY_KEYS)
    node.only(POLICY_KEYS)
    labels_shape = "a list of non-empty strings"
    fields: dict[str, Any] = {
        "hold_labels": node.items(
            "hold_labels", _POLICY.hold_labels, labels_shape, _is_text, empty=True
        ),
        "fixture_label": node.text("fixture_label", _POLICY.fixture_label),
        "do_not_dispatch": node.text("do_not_dispatch", _POLICY.do_not_dispatch),
        "attempt_cap": node.integer("attempt_cap", _POLICY.attempt_cap),
        "capacity_cap": node.integer("capacity_cap", _POLICY.capacity_cap),
        "max_turns": node.integer("max_turns", _POLICY.max_turns),
        "retry_backoffs_s": node.items(
            "retry_backoffs_s",
            _POLICY.retry_backoffs_s,
            "a non-empty list of positive integers (seconds)",
            _is_int(1, None),
            empty=False,
        ),
        "reaper_threshold_s": node.integer("reaper_threshold_s", _POLICY.reaper_threshold_s),
        "timer_period_s": node.integer("timer_period_s", _POLICY.timer_period_s),
        "report_label": node.text("report_label", _POLICY.report_label),
    }
    return node, fields


def _worker(
    seq: Seq, i: int, top: _Node, base: Path, max_run_s: int, warnings: list[str]
) -> WorkerConfig:
    node = _worker_node(seq, i, top)
    name = node.name("name", None, required=True)
    transport, host, master = _reach(node)
    ssh = transport is TransportKind.SSH

    @overload
    def here(text: str) -> str: ...
    @overload
    def here(text: None) -> None: ...
    def here(text: str | None) -> str | None:
        """A path on the worker: resolved on this box for a local worker, as written for ssh."""
        if text is None or ssh:
            return text
        return str(_local_path(text, base))

    def mine(text: str | None) -> str | None:
        """A path on this (the dispatching) box, whatever the transport: the key, known_hosts."""
        return None if text is None else str(_local_path(text, base))

    opt = {"nullable": True}
    return WorkerConfig(
        name=name,
        transport=transport,
        host=host,
        port=node.integer("port", DEFAULT_SSH_PORT, 1, 65535),
        master=master,
        lane=node.name("lane", name),
        clone=here(node.text("clone", f".fleet/workers/{name}/clone")),
        runner_clone=here(node.text("runner_clone", None, **opt)),
        runner_remote=node.text("runner_remote", None, **opt),
        path_prefix=node.items(
            "path_prefix",
            DEFAULT_PATH_PREFIX,
            "a list of non-empty strings (directories)",
            _is_text,
            empty=True,
        ),
        agent=node.text("agent", DEFAULT_AGENT),
        supervisor=SupervisorKind(node.choice("supervisor", SupervisorKind.AUTO, SUPERVISORS)),
        key=mine(node.text("key", None, **opt)),
        known_hosts=mine(node.text("known_hosts", None, **opt)),
        state_dir=here(node.text("state_dir", f".fleet/workers/{name}")),
        python=node.text("python", DEFAULT_PYTHON),
        max_run_s=node.integer("max_run_s", max_run_s),
        agent_kind=_agent_kind(node, warnings),
        agent_token_file=node.text("agent_token_file", None, **opt),
        agent_token_env=node.get(
            "agent_token_env", "GH_TOKEN", "a variable NAME", _matches(_ENV_NAME)
        ),
    )


def _worker_node(seq: Seq, i: int, top: _Node) -> _Node:
    """``workers[i]``, refused at its own position unless it is a mapping of known keys."""
    value = seq[i]
    where = f"workers[{i}]"
    if not isinstance(value, Map):
        top.fail(
            seq.items_at[i],
            f"{where}: expected a mapping with keys {', '.join(WORKER_KEYS)}, "
            f"got {_describe(value)}",
        )
    node = _Node(top.file, where, value, value.pos)
    node.only(WORKER_KEYS)
    return node


def _reach(node: _Node) -> tuple[TransportKind, str | None, str | None]:
    """A worker's transport, host and master."""
    transport = TransportKind(node.choice("transport", TransportKind.LOCAL, TRANSPORTS))
    ssh = transport is TransportKind.SSH
    # An ssh worker without a host or master cannot be reached; a local one with a host is a worker
    # the operator believes is remote and is not (a silent change of behaviour).
    host = node.get(
        "host", None, "a host name or address", _is_text, required=ssh, nullable=not ssh
    )
    if not ssh and host is not None:
        node.fail(
            node.key_pos("host"),
            f"{node.where}.host: a local worker has no host "
            "(expected transport: ssh, or no host key)",
        )
    master = node.get("master", None, "a unix user name", _is_text, required=ssh, nullable=not ssh)
    return transport, host, master


def _agent_kind(node: _Node, warnings: list[str]) -> AgentKind:
    """``agent_kind`` as written, else detected from ``agent``'s program with a positioned warning
    when the program is none of the known CLIs (it then runs as ``plain``)."""
    if "agent_kind" in node.data:
        return AgentKind(node.choice("agent_kind", AgentKind.CLAUDE.value, AGENT_KINDS))
    kind, warning = detect_kind(node.text("agent", DEFAULT_AGENT))
    if warning is not None:
        line, column = node.value_pos("agent") if "agent" in node.data else node.pos
        warnings.append(
            f"{node.file}:{line + 1}:{column + 1}: {node.where}.{warning}; "
            f"expected agent_kind: one of {', '.join(AGENT_KINDS)}"
        )
    return kind


def _workers(
    top: _Node, base: Path, max_run_s: int, warnings: list[str], *, required: bool
) -> tuple[WorkerConfig, ...]:
    seq = top.data.get("workers")
    if seq is None and not required:
        return ()
    if not isinstance(seq, Seq) or (required and len(seq) == 0):
        pos = top.value_pos("workers") if "workers" in top.data else top.pos
        top.fail(
            pos,
            f"workers: expected a non-empty list of worker mappings (keys: "
            f"{', '.join(WORKER_KEYS)}), got {_describe(seq)}",
        )
    workers = tuple(_worker(seq, i, top, base, max_run_s, warnings) for i in range(len(seq)))
    first: dict[str, int] = {}
    for i, w in enumerate(workers):
        if w.name in first:
            item = _Node(top.file, f"workers[{i}]", seq[i], seq[i].pos)
            top.fail(
                item.value_pos("name"),
                f"workers[{i}].name: duplicate worker name {w.name!r} (first at "
                f"workers[{first[w.name]}]); expected unique names",
            )
        first[w.name] = i
    return workers


# --- documents ------------------------------------------------------------------------------------


def _yaml() -> YAML:
    """A round-trip loader for edits: comments and quotes kept."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap an operator's long line on an edit
    yaml.representer.add_representer(type(None), _represent_null)  # `host: null`, not `host:`
    return yaml


def _represent_null(representer: Any, _: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _parse(text: str, file: str) -> Any:
    try:
        return posyaml.load(text)
    except posyaml.YAMLFault as exc:
        line, column = exc.pos
        raise InventoryError(
            file,
            line + 1,
            column + 1,
            f"YAML syntax error: {exc.problem} (expected a YAML mapping)",
        ) from None


def _parse_for_edit(text: str, file: str) -> Any:
    """The document as ruamel's round-trip tree, to edit and dump with its comments."""
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    try:
        return _yaml().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = exc.problem or exc.context or "malformed YAML"
        raise InventoryError(
            file, line, column, f"YAML syntax error: {problem} (expected a YAML mapping)"
        ) from None
    except YAMLError as exc:
        raise InventoryError(file, 1, 1, f"YAML error: {exc} (expected a YAML mapping)") from None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(
            str(path), 1, 1, f"cannot read the inventory: {exc} (expected a UTF-8 YAML file)"
        ) from None


def _build(doc: Any, file: str, *, require_workers: bool = True) -> Inventory:
    base = Path(file).parent
    if not isinstance(doc, Map):
        what = "an empty file" if doc is None else _describe(doc)
        raise InventoryError(
            file, 1, 1, f"expected a mapping with keys {', '.join(TOP_KEYS)}, got {what}"
        )
    top = _Node(file, "", doc, doc.pos)
    top.only(TOP_KEYS)
    board = _board(top, base)
    policy_node, policy_fields = _policy(top)
    max_run_s = policy_node.integer("max_run_s", DEFAULT_MAX_RUN_S)
    lock_node = top.child("lock", LOCK_KEYS)
    lock_node.only(LOCK_KEYS)
    halt_node = top.child("halt", HALT_KEYS)
    halt_node.only(HALT_KEYS)
    halt = HaltConfig(
        file=_local_path(halt_node.text("file", ".fleet/HALT"), base),
        issue_title=halt_node.text("issue_title", _POLICY.halt_title),
    )
    state_dir = _local_path(top.text("state_dir", ".fleet/state"), base)
    warnings: list[str] = []
    workers = _workers(top, base, max_run_s, warnings, required=require_workers)
    lock_host = lock_node.name("host", None, nullable=True)
    ssh_names = [w.name for w in workers if w.transport == TransportKind.SSH]
    if lock_host is not None and lock_host not in ssh_names:
        lock_node.fail(
            lock_node.value_pos("host"),
            f"lock.host: expected the name of an ssh worker "
            f"({', '.join(ssh_names) or 'there is none'}) or null, got {lock_host!r}",
        )
    lock = LockConfig(
        path=_local_path(lock_node.text("path", ".fleet/fleet.lock"), base),
        wait_s=lock_node.seconds("wait_s", DEFAULT_LOCK_WAIT_S),
        host=lock_host,
    )
    trust = _trust(top, board)
    policy = Policy(
        **policy_fields, halt_title=halt.issue_title, identity=board.identity, trust=trust
    )
    return Inventory(Path(file), board, lock, halt, policy, state_dir, workers, tuple(warnings))


def loads(text: str, path: str = "<inventory>") -> Inventory:
    """Validate ``text`` as an inventory; relative paths resolve against ``Path(path).parent``."""
    return _build(_parse(text, path), path)


def load(path: str | os.PathLike[str]) -> Inventory:
    """Read and validate the inventory at ``path``; any problem is an :class:`InventoryError`."""
    return loads(_read(Path(path)), os.fspath(path))


def default_path() -> Path:
    """``$FLEET_INVENTORY`` if set, else ``./inventory.yaml``."""
    return Path(os.environ.get(ENV_VAR) or "inventory.yaml")


# --- round-trip edit ------------------------------------------------------------------------------


def _to_yaml(value: object) -> object:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, list | tuple):
        seq = CommentedSeq(_to_yaml(v) for v in value)
        seq.fa.set_flow_style()  # path_prefix: [~/.local/bin] reads like the committed file
        return seq
    if isinstance(value, Mapping):
        return CommentedMap((k, _to_yaml(v)) for k, v in value.items())
    return value


def add_worker(path: str | os.PathLike[str], fields: Mapping[str, object]) -> None:
    """Append a worker to the inventory at ``path``, keeping the operator's comments and key order.

    The edited document is validated as a whole (a bad field, a duplicate name) before anything is
    written, and written by rename, so a refused edit leaves the file byte-identical. ``None``
    values are left out (the default applies). Positions in an error about the new worker are
    those of the file as it would be after the edit.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.util import load_yaml_guess_indent

    file = os.fspath(path)
    text = _read(Path(file))
    _build(_parse(text, file), file, require_workers=False)  # the file must be valid on its own
    doc = _parse_for_edit(text, file)
    workers = doc.get("workers")
    if workers is None:
        workers = CommentedSeq()
        doc["workers"] = workers
    if not workers:
        workers.fa.set_block_style()  # `workers: []` grows into a block list like the committed one
    known = [k for k in WORKER_KEYS if k in fields] + [k for k in fields if k not in WORKER_KEYS]
    entry = CommentedMap((k, _to_yaml(fields[k])) for k in known if fields[k] is not None)
    workers.append(entry)
    # Keep the operator's indentation: ruamel guesses the sequence indent and the dash offset; the
    # mapping indent is read off the first nested block mapping (else the items' own).
    _, sequence, offset = load_yaml_guess_indent(text)
    sequence, offset = sequence or 2, offset or 0
    yaml = _yaml()
    yaml.indent(mapping=_mapping_indent(doc, sequence - offset), sequence=sequence, offset=offset)
    out = io.StringIO()
    yaml.dump(doc, out)
    new_text = out.getvalue()
    try:
        loads(new_text, file)
    except InventoryError as exc:
        raise InventoryError(
            exc.file, exc.line, exc.column, f"{exc.message} (in the worker being added)"
        ) from None
    _replace(Path(os.path.realpath(file)), new_text)


def _mapping_indent(doc: CommentedMap, fallback: int) -> int:
    from ruamel.yaml.comments import CommentedMap

    for value in doc.values():
        if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
            return int(value.lc.col) or fallback
    return max(fallback, 1)


def _replace(target: Path, text: str) -> None:
    """Write by rename: a reader never sees half a file, a failed write leaves the old one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        shutil.copymode(target, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
