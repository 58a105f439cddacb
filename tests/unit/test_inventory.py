"""The inventory: the committed default, its defaults, and an error that points at the right place.

Every error names ``file:line:column`` and the expected shape; the tables below pin exact positions
so a refactor that loses them fails here, not in front of an operator.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet import inventory
from fleet.core.model import Policy
from fleet.inventory import InventoryError, add_worker, default_path, load, loads

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "inventory.yaml"


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def error(text: str, path: str = "inv.yaml") -> InventoryError:
    with pytest.raises(InventoryError) as caught:
        loads(doc(text), path)
    return caught.value


# --- the committed default ------------------------------------------------------------------------


def test_committed_inventory_is_the_embedded_default() -> None:
    inv = load(COMMITTED)
    assert inv.board.kind == "local" and inv.board.github is None
    demo = REPO / ".fleet" / "demo"  # the demo's fleet (fleet/demo.py, test_demo_inventory.py)
    assert inv.board.path == demo / "board.sqlite3"
    assert inv.board.origin == demo / "origin.git"
    assert inv.lock.path == demo / "fleet.lock" and inv.lock.host is None
    assert inv.halt.file == demo / "HALT"
    assert inv.state_dir == demo / "state"
    assert [(w.name, w.transport) for w in inv.workers] == [
        ("local", "local"),
        ("local-2", "local"),
        ("local-3", "local"),
    ]
    assert inv.policy == Policy()  # the file repeats fleet.core.model's defaults, nothing else


def test_committed_defaults_live_under_a_git_ignored_directory() -> None:
    ignored = (REPO / ".gitignore").read_text().split()
    assert ".fleet/" in ignored


def test_every_committed_number_says_what_it_bounds() -> None:
    """The rule: a constant with a default carries a comment naming the failure it bounds."""
    lines = COMMITTED.read_text().splitlines()
    valued = [ln for ln in lines if re.match(r"^ {2}[a-z_]+: \S", ln)]  # lock/halt/policy/board
    assert len(valued) >= 15
    assert [ln for ln in valued if " # " not in ln] == []


def _uncomment_examples(text: str) -> str:
    """The committed file with its commented-out GitHub board and SSH worker switched on."""
    lines = text.splitlines()
    start = lines.index("# board:")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("#   "))
    github = [line[2:] for line in lines[start:end]]
    board = lines.index("board:")
    board_end = lines.index("", board)
    out = lines[:board] + github + lines[board_end:start] + lines[end:]
    ssh = [re.sub(r"^  # ", "  ", line) if re.match(r"^  # ( |-)", line) else line for line in out]
    return "\n".join(ssh) + "\n"


def test_commented_out_examples_are_valid_when_switched_on() -> None:
    inv = loads(_uncomment_examples(COMMITTED.read_text()), str(COMMITTED))
    assert inv.board.kind == "github" and inv.board.path is None and inv.board.origin is None
    assert inv.board.github is not None and inv.board.github.token_env == "GITHUB_TOKEN"
    assert inv.board.github.lane_field == "Lane"
    assert inv.policy.identity == inv.board.identity == "example-bot"
    box = inv.worker("box1")
    assert box is not None and box.transport == "ssh" and box.master == "agent"
    assert box.clone == "fleet-work/target"  # a remote path stays as written
    assert box.key == str(Path("~/.ssh/fleet_ed25519").expanduser())  # a file on this box


# --- defaults and paths ---------------------------------------------------------------------------


def test_defaults_of_a_minimal_inventory(tmp_path: Path) -> None:
    inv = loads("workers: [{name: w1}]\n", str(tmp_path / "inv.yaml"))
    assert inv.path == tmp_path / "inv.yaml"
    assert inv.board.path == tmp_path / ".fleet/board.sqlite3"
    assert inv.board.identity == "fleet"
    assert inv.lock.wait_s == 30.0 and isinstance(inv.lock.wait_s, float)
    assert inv.halt.issue_title == "HALT FLEET" == inv.policy.halt_title
    assert inv.policy == Policy()
    (w,) = inv.workers
    assert (w.transport, w.host, w.port, w.master, w.lane) == ("local", None, 22, None, "w1")
    assert w.clone == str(tmp_path / ".fleet/workers/w1/clone")
    assert w.state_dir == str(tmp_path / ".fleet/workers/w1")
    assert (w.runner_clone, w.runner_remote, w.key, w.known_hosts) == (None, None, None, None)
    assert w.path_prefix == ("~/.local/bin",)
    assert (w.agent, w.supervisor, w.python) == ("python -m fleet.agents.demo", "auto", "python3")
    assert w.max_run_s == 3600
    assert inv.worker("w1") is w and inv.worker("nope") is None


def test_policy_section_and_identity_reach_policy(tmp_path: Path) -> None:
    inv = loads(
        doc("""
            board: {identity: bot}
            halt: {issue_title: STOP}
            policy:
              hold_labels: []
              attempt_cap: 5
              retry_backoffs_s: [200, 400]
              max_run_s: 90
            workers: [{name: w1}, {name: w2, max_run_s: 10}]
            """),
        str(tmp_path / "inv.yaml"),
    )
    assert inv.policy == Policy(
        hold_labels=(),
        attempt_cap=5,
        retry_backoffs_s=(200, 400),
        halt_title="STOP",
        identity="bot",
    )
    assert [w.max_run_s for w in inv.workers] == [90, 10]


def test_local_paths_resolve_and_ssh_paths_stay_as_written(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "link").symlink_to(real)
    inv = loads(
        doc("""
            state_dir: link/state
            lock: {path: /abs/fleet.lock}
            workers:
              - {name: here, clone: ~/clone, state_dir: ../up}
              - {name: there, transport: ssh, host: h, master: m, clone: work/c, key: k/id}
            """),
        str(tmp_path / "conf" / "inv.yaml"),
    )
    assert inv.state_dir == tmp_path / "conf/link/state"  # relative to the file, symlink kept
    assert inv.lock.path == Path("/abs/fleet.lock")
    here, there = inv.workers
    assert here.clone == str(Path.home() / "clone")
    assert here.state_dir == str(tmp_path / "up")
    assert there.clone == "work/c" and there.state_dir == ".fleet/workers/there"
    assert there.key == str(tmp_path / "conf/k/id")  # the key is read on the dispatching box


def test_github_board(tmp_path: Path) -> None:
    inv = loads(
        doc("""
            board:
              kind: github
              owner: acme
              repo: widgets.py
              project_number: 7
              identity: acme-bot
              token_env: FLEET_GH_TOKEN
            workers: [{name: w1}]
            """)
    )
    assert inv.board.github == inventory.GitHubConfig("acme", "widgets.py", 7, "FLEET_GH_TOKEN")
    assert inv.policy.identity == "acme-bot"


def test_github_lane_field_reaches_the_board() -> None:
    """The lane field named in the inventory is the one the board's queries read (predicate 4)."""
    from fleet.board.github import GitHubBoard

    inv = loads(
        doc("""
            board: {kind: github, owner: acme, repo: w, project_number: 7, identity: bot,
                    lane_field: Where}
            workers: [{name: w1}]
            """)
    )
    assert inv.board.github is not None and inv.board.github.lane_field == "Where"
    board = GitHubBoard.from_env(inv.board, {"GITHUB_TOKEN": "t0ken"})
    assert board.lane_field == "Where"


def test_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLEET_INVENTORY", raising=False)
    assert default_path() == Path("inventory.yaml")
    monkeypatch.setenv("FLEET_INVENTORY", "/etc/fleet/inv.yaml")
    assert default_path() == Path("/etc/fleet/inv.yaml")


def test_merged_keys_are_checked_too() -> None:
    text = """
        workers:
          - &base {name: a, transport: ssh, host: h, master: m}
          - <<: *base
            name: b
        """
    assert [w.host for w in loads(doc(text)).workers] == ["h", "h"]
    exc = error(text.replace("    name: b\n", ""))  # a merged-in key has no place of its own
    assert (exc.line, exc.column) == (3, 5) and "duplicate worker name 'a'" in exc.message


# --- errors: file, line, column, expected shape ---------------------------------------------------

WORKER_A = "workers:\n  - name: a\n"

CASES = [
    # (document, line, column, words the message must contain)
    (
        """
        board:
          kind: local
        policy:
          attempt_cap: 3
        workers:
          - name: a
            prot: 22
        """,
        7,
        5,
        ["unknown key 'prot' in workers[0]", "expected one of: name, transport"],
    ),
    ("colour: red\n" + WORKER_A, 1, 1, ["unknown key 'colour' in the top level"]),
    ("policy:\n  atempt_cap: 3\n" + WORKER_A, 2, 3, ["unknown key 'atempt_cap' in policy"]),
    ("lock: {path: x, wiat_s: 3}\n" + WORKER_A, 1, 17, ["unknown key 'wiat_s' in lock"]),
    ("halt:\n  reason: x\n" + WORKER_A, 2, 3, ["unknown key 'reason' in halt"]),
    (
        WORKER_A + "    port: abc\n",
        3,
        11,
        ["workers[0].port: expected an integer 1-65535, got 'abc'"],
    ),
    (WORKER_A + "    port: 0\n", 3, 11, ["expected an integer 1-65535, got 0"]),
    (WORKER_A + "    port: true\n", 3, 11, ["expected an integer 1-65535, got true"]),
    (WORKER_A + "    port: 22.5\n", 3, 11, ["got 22.5"]),
    (
        WORKER_A + "    transport: scp\n",
        3,
        16,
        ["workers[0].transport: expected one of: local, ssh"],
    ),
    (WORKER_A + "    supervisor: cron\n", 3, 17, ["expected one of: auto, systemd, portable"]),
    (WORKER_A + "    lane: Big Box\n", 3, 11, ["workers[0].lane: expected a name matching"]),
    (WORKER_A + "    host: h\n", 3, 5, ["workers[0].host: a local worker has no host"]),
    (WORKER_A + "    path_prefix: [/bin, 3]\n", 3, 25, ["workers[0].path_prefix[1]", "got 3"]),
    (WORKER_A + "    path_prefix: /bin\n", 3, 18, ["expected a list of non-empty strings"]),
    (WORKER_A + "    agent: ''\n", 3, 12, ["workers[0].agent: expected a non-empty string"]),
    (
        WORKER_A + "    max_run_s: -5\n",
        3,
        16,
        ["workers[0].max_run_s: expected a positive integer"],
    ),
    ("workers:\n  - name: Bad\n", 2, 11, ["workers[0].name: expected a name matching"]),
    ("workers:\n  - lane: x\n", 2, 5, ["workers[0]: missing key 'name'"]),
    (
        "workers:\n  - name: a\n    transport: ssh\n    host: h\n",
        2,
        5,
        ["workers[0]: missing key 'master' (expected a unix user name)"],
    ),
    ("workers:\n  - {name: a, transport: ssh, master: m}\n", 2, 5, ["missing key 'host'"]),
    ("workers:\n  - name: a\n  - just-a-name\n", 3, 5, ["workers[1]: expected a mapping"]),
    ("workers: []\n", 1, 10, ["workers: expected a non-empty list", "got a list"]),
    ("workers: a\n", 1, 10, ["workers: expected a non-empty list", "got 'a'"]),
    ("policy: {}\n", 1, 1, ["workers: expected a non-empty list", "got null"]),
    ("", 1, 1, ["expected a mapping with keys board, lock", "got an empty file"]),
    ("- a\n- b\n", 1, 1, ["expected a mapping", "got a list"]),
    ("board: local\n" + WORKER_A, 1, 8, ["board: expected a mapping with keys kind, path"]),
    ("board: {kind: jira}\n" + WORKER_A, 1, 15, ["board.kind: expected one of: local, github"]),
    (
        "board:\n  kind: github\n  owner: o\n  repo: r\n  project_number: 1\n  identity: i\n"
        "  path: x.db\n" + WORKER_A,
        7,
        3,
        ["unknown key 'path' in board for kind github", "token_env"],
    ),
    (
        "board: {kind: github, owner: o, repo: r, project_number: 1}\n" + WORKER_A,
        1,
        8,
        ["board: missing key 'identity'"],
    ),
    (
        "board: {kind: github, owner: o/r, repo: r, project_number: 1, identity: i}\n" + WORKER_A,
        1,
        30,
        ["board.owner: expected a GitHub login, got 'o/r'"],
    ),
    (
        "board: {kind: github, owner: o, repo: r, project_number: 1, identity: i,"
        " token_env: ghp_abc-123}\n" + WORKER_A,
        1,
        85,
        ["board.token_env: expected a variable NAME"],
    ),
    (
        "board: {kind: github, owner: o, repo: r, project_number: x, identity: i}\n" + WORKER_A,
        1,
        58,
        ["board.project_number: expected a positive integer"],
    ),
    ("lock: {wait_s: 0}\n" + WORKER_A, 1, 16, ["lock.wait_s: expected a positive number"]),
    ("lock: {host: a}\n" + WORKER_A, 1, 14, ["lock.host: expected the name of an ssh worker"]),
    ("policy:\n  retry_backoffs_s: []\n" + WORKER_A, 2, 21, ["expected a non-empty list"]),
    ("policy:\n  retry_backoffs_s: [30, -1]\n" + WORKER_A, 2, 26, ["retry_backoffs_s[1]"]),
    ("policy:\n  hold_labels: hold\n" + WORKER_A, 2, 16, ["policy.hold_labels: expected a list"]),
    ("policy:\n  attempt_cap: 0\n" + WORKER_A, 2, 16, ["policy.attempt_cap: expected a positive"]),
    ("state_dir: 5\n" + WORKER_A, 1, 12, ["state_dir: expected a non-empty string, got 5"]),
    ("halt: {issue_title: null}\n" + WORKER_A, 1, 21, ["halt.issue_title: expected a non-empty"]),
]


@pytest.mark.parametrize(("text", "line", "column", "words"), CASES)
def test_error_names_file_line_column_and_shape(
    text: str, line: int, column: int, words: list[str]
) -> None:
    exc = error(text)
    assert (exc.file, exc.line, exc.column) == ("inv.yaml", line, column), str(exc)
    assert str(exc) == f"inv.yaml:{line}:{column}: {exc.message}"
    for word in words:
        assert word in exc.message, str(exc)
    assert isinstance(exc, ValueError)


def test_lock_host_must_be_an_ssh_worker_and_may_be_one() -> None:
    text = "lock: {host: b}\nworkers:\n  - {name: a}\n  - {name: b, transport: ssh, host: h, master: m}\n"
    assert loads(text).lock.host == "b"
    exc = error(text.replace("host: b}", "host: a}"))
    assert "(b) or null, got 'a'" in exc.message


def test_duplicate_worker_name_points_at_the_second() -> None:
    exc = error("workers:\n  - name: a\n  - name: b\n  - name: a\n")
    assert (exc.line, exc.column) == (4, 11)
    assert "workers[2].name: duplicate worker name 'a' (first at workers[0])" in exc.message


def test_yaml_syntax_error_has_a_position() -> None:
    exc = error("workers:\n  - name: a\n    port: [22\n")
    assert exc.line == 4 and exc.column == 1 and "YAML syntax error" in exc.message
    exc = error("workers: [{name: a}]\nworkers: [{name: b}]\n")
    assert (exc.line, exc.column) == (2, 1) and "duplicate key" in exc.message


def test_unreadable_file_is_an_inventory_error(tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as caught:
        load(tmp_path / "missing.yaml")
    assert caught.value.file == str(tmp_path / "missing.yaml")
    assert "cannot read the inventory" in caught.value.message


# --- properties -----------------------------------------------------------------------------------

PORT_AT = (3, 11)  # where the value sits in WORKER_A + "    port: ..."


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_any_integer_port_is_accepted_exactly_in_range(port: int) -> None:
    text = WORKER_A + f"    port: {port}\n"
    if 1 <= port <= 65535:
        assert loads(text).workers[0].port == port
    else:
        exc = error(text)
        assert (exc.line, exc.column) == PORT_AT and "workers[0].port" in exc.message


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=12))
def test_a_string_port_is_always_an_error(port: str) -> None:
    quoted = '"' + port.replace("\\", "\\\\").replace('"', '\\"') + '"'
    exc = error(WORKER_A + f"    port: {quoted}\n")
    assert (exc.line, exc.column) == PORT_AT
    assert f"got {port!r}" in exc.message


SECTIONS = {  # where an unknown key goes, and the text around it ({k} = the key line)
    "the top level": ("{k}\n" + WORKER_A, 1, 1),
    "policy": ("policy:\n  attempt_cap: 3\n  {k}\n" + WORKER_A, 3, 3),
    "lock": ("lock:\n  {k}\n" + WORKER_A, 2, 3),
    "board for kind local": ("board:\n  kind: local\n  {k}\n" + WORKER_A, 3, 3),
    "workers[0]": (WORKER_A + "    {k}\n", 3, 5),
}
ALL_KEYS = set(inventory.TOP_KEYS + inventory.POLICY_KEYS + inventory.WORKER_KEYS)
ALL_KEYS |= set(inventory.LOCK_KEYS + inventory.LOCAL_BOARD_KEYS + inventory.GITHUB_BOARD_KEYS)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    st.sampled_from(sorted(SECTIONS)),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_ .-]{0,20}", fullmatch=True).filter(
        lambda k: k not in ALL_KEYS and k == k.strip()
    ),
)
def test_an_unknown_key_is_an_error_naming_it(section: str, key: str) -> None:
    template, line, column = SECTIONS[section]
    exc = error(template.replace("{k}", f"'{key}': 1"))
    assert f"unknown key {key!r} in {section}" in exc.message
    assert (exc.line, exc.column) == (line, column)


# --- add_worker: a round trip that keeps the operator's file --------------------------------------


def test_add_worker_keeps_comments_order_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    before = COMMITTED.read_text()
    path.write_text(before)
    fields = {"master": "agent", "port": 2222, "name": "box2", "transport": "ssh"}
    add_worker(path, {**fields, "host": "127.0.0.1", "path_prefix": ("/opt/bin",), "key": None})
    after = path.read_text()
    assert after.startswith(before)  # every comment, key and blank line of the operator's file
    assert after[len(before) :] == (
        "  - name: box2\n    transport: ssh\n    host: 127.0.0.1\n    port: 2222\n"
        "    master: agent\n    path_prefix: [/opt/bin]\n"
    )  # in the schema's key order, None left out, the file's own indentation
    box = load(path).worker("box2")
    assert box is not None and (box.host, box.port, box.path_prefix) == (
        "127.0.0.1",
        2222,
        ("/opt/bin",),
    )


def test_add_worker_keeps_a_different_indentation(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    before = "# mine\nlock:\n    wait_s: 5  # short\nworkers:\n- name: a\n  agent: x\n"
    path.write_text(before)
    add_worker(path, {"name": "b"})
    assert path.read_text() == before + "- name: b\n"


def test_add_worker_to_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("state_dir: s  # here\nworkers: []\n")
    add_worker(path, {"name": "a", "supervisor": "portable"})
    assert [w.supervisor for w in load(path).workers] == ["portable"]
    assert "# here" in path.read_text()


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"name": "local"}, "duplicate worker name 'local'"),
        ({"name": "b", "port": "abc"}, "port: expected an integer 1-65535, got 'abc'"),
        ({"name": "b", "prot": 22}, "unknown key 'prot'"),
        ({"name": "b", "transport": "ssh", "host": "h"}, "missing key 'master'"),
    ],
)
def test_add_worker_refused_leaves_the_file_byte_identical(
    tmp_path: Path, fields: dict[str, object], words: str
) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_bytes(COMMITTED.read_bytes())
    stat = path.stat()
    with pytest.raises(InventoryError) as caught:
        add_worker(path, fields)
    assert words in caught.value.message and "(in the worker being added)" in caught.value.message
    assert path.read_bytes() == COMMITTED.read_bytes()
    assert path.stat().st_ino == stat.st_ino  # not even replaced by an identical copy
    assert sorted(os.listdir(tmp_path)) == ["inventory.yaml"]  # no temporary file left behind


def test_add_worker_reports_an_existing_error_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("policy:\n  atempt_cap: 3\nworkers: []\n")
    with pytest.raises(InventoryError) as caught:
        add_worker(path, {"name": "a"})
    assert (caught.value.line, caught.value.column) == (2, 3)
    assert "in the worker being added" not in caught.value.message


# -- agent_kind (docs/agents.md) ------------------------------------------------------------------


def test_agent_kind_is_detected_from_the_agent_command_or_taken_as_written() -> None:
    inv = loads(
        doc(
            """
            workers:
              - name: a
                agent: codex exec --json -
              - name: b
                agent: ./wrap-claude.sh
                agent_kind: claude
              - name: c
            """
        ),
        "inv.yaml",
    )
    assert [w.agent_kind.value for w in inv.workers] == ["codex", "claude", "claude"]
    assert inv.warnings == ()  # the demo default and the named kinds need no warning


def test_an_unknown_program_runs_as_plain_with_a_positioned_warning() -> None:
    inv = loads(doc("workers:\n  - name: a\n    agent: aider --yes-always\n"), "inv.yaml")
    assert inv.workers[0].agent_kind.value == "plain"
    (warning,) = inv.warnings
    assert warning.startswith("inv.yaml:3:12: workers[0].agent") and "agent_kind" in warning


def test_a_misspelt_agent_kind_is_a_positioned_error() -> None:
    err = error("workers:\n  - name: a\n    agent_kind: claud\n")
    assert (err.line, err.column) == (3, 17)
    assert "claude, codex, gemini, plain" in err.message


def test_capacity_cap_is_a_positive_integer() -> None:
    assert (
        loads(doc("policy:\n  capacity_cap: 5\nworkers:\n  - name: a\n")).policy.capacity_cap == 5
    )
    err = error("policy:\n  capacity_cap: 0\nworkers:\n  - name: a\n")
    assert (err.line, "capacity_cap") == (2, "capacity_cap") and "positive integer" in err.message
