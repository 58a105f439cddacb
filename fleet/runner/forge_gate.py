"""The agent's only door to the embedded forge: a Unix socket the runner serves for one run.

On the embedded board the queue and the forge share one SQLite file, and the agent once got that
file's path in its environment: with it, it could insert a pull-request row already ``merged``,
post, delete or rewrite markers — write the run's outcome itself. Now the agent's environment names
no board file, no origin path and no inventory; what the agent may do to the forge it asks the
runner through this gate, which does exactly what a hosted forge lets an agent's token do and no
more:

``issue``          read this run's issue (title, body, labels, comments)
``create_pr``      open a PR for a branch already pushed to origin, authored by the agent
``merge_pr``       merge a PR this run opened through the gate (a real merge into origin ``main``)
``pull_request``   read a PR this run opened

No comment, no label, no close, no other issue, no PR opened by anyone else. The socket lives in a
fresh 0700 directory; one JSON request and one JSON answer per connection, requests bounded in size.
Nothing an agent sends can stop the runner: every error is an answer (``{"ok": false, ...}``).

What a shared unix user cannot prevent (docs/security.md): an agent running as the runner's own user
can still read the inventory the runner was started with and open the board file itself. The gate
takes away the path handed to it; the close-out's check on origin (:mod:`fleet.runner.merge_proof`)
is what holds even then, and a separate unix user for the agent is what closes the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fleet.board.base import BoardError, BoardWriteError
from fleet.core.model import Issue, PullRequest
from fleet.trace import to_jsonable
from fleet.trace.codec import CodecError, decode

T = TypeVar("T")

ENV_VAR = "FLEET_FORGE"  # the socket's path, in the agent's environment
MAX_REQUEST = 1 << 20  # 1 MiB: a PR body is text a human reads; GitHub caps one at 65,536 chars
CONNECTION_TIMEOUT_S = 30.0  # one request and one answer; a client that stalls is dropped
ACCEPT_POLL_S = 0.2  # how soon a finished run's gate notices it is over
CLIENT_TIMEOUT_S = 120.0  # a merge holds the board's write lock across a git merge


class Forge(Protocol):
    """What the gate needs of a board: the embedded board's forge methods."""

    def issue(self, number: int) -> Issue | None: ...

    def create_pr(
        self, branch: str, title: str, body: str, *, author: str = ..., repository: str | None = ...
    ) -> PullRequest: ...

    def merge_pr(self, number: int, *, merged_by: str = ...) -> PullRequest: ...

    def pull_request(self, number: int) -> PullRequest | None: ...


class GateRefused(Exception):
    """A request the gate does not serve; the message is the answer the agent gets."""


@dataclass
class ForgeGate:
    """Serve ``board``'s forge for ``issue`` to one agent, as ``author``, while the block runs."""

    board: Forge
    issue: int
    author: str
    opened: set[int] = field(default_factory=set)
    path: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- lifecycle -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def serving(self) -> Iterator[Path]:
        """Bind a socket in a fresh private directory (short: AF_UNIX paths stop at ~107 bytes).

        The serving thread polls a stop flag between accepts and is joined before the socket is
        closed: closing a socket another thread is blocked in ``accept`` on does not wake it on
        Linux, and such a thread outlived its run and answered the next run's agent."""
        home = Path(tempfile.mkdtemp(prefix="fleet-forge-"))  # 0700
        self.path = home / "s"
        stop = threading.Event()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        thread = threading.Thread(
            target=self._serve, args=(sock, stop), name="forge-gate", daemon=True
        )
        try:
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)
            sock.listen(8)
            sock.settimeout(ACCEPT_POLL_S)
            thread.start()
            yield self.path
        finally:
            stop.set()
            if thread.is_alive():
                thread.join(CONNECTION_TIMEOUT_S + ACCEPT_POLL_S)
            sock.close()
            shutil.rmtree(home, ignore_errors=True)

    def _serve(self, sock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(CONNECTION_TIMEOUT_S)
                with contextlib.suppress(OSError):
                    conn.sendall(self.answer(_read_request(conn)) + b"\n")

    # -- requests --------------------------------------------------------------------------------
    def answer(self, raw: bytes) -> bytes:
        """One request's answer, as bytes; never raises (an agent cannot crash the runner)."""
        try:
            req = json.loads(raw)
            if not isinstance(req, dict) or not isinstance(req.get("op"), str):
                raise GateRefused("a request is a JSON object with a string 'op'")
            with self._lock:  # one request at a time: ``opened`` and the board's writes
                result = self._do(req)
            return json.dumps({"ok": True, "result": to_jsonable(result)}).encode()
        except (GateRefused, BoardError) as exc:
            return json.dumps({"ok": False, "error": str(exc)}).encode()
        except (ValueError, RecursionError) as exc:
            return json.dumps({"ok": False, "error": f"unreadable request: {exc}"}).encode()
        except Exception as exc:  # the agent's request must never end the run
            return json.dumps(
                {"ok": False, "error": f"gate error: {type(exc).__name__}: {exc}"}
            ).encode()

    def _do(self, req: dict[str, Any]) -> object:
        op = req["op"]
        if op == "issue":
            return self.board.issue(self.issue)
        if op == "create_pr":
            branch, title, body = (_text(req, k) for k in ("branch", "title", "body"))
            pr = self.board.create_pr(branch, title, body, author=self.author)
            self.opened.add(pr.number)
            return pr
        if op in ("merge_pr", "pull_request"):
            number = req.get("number")
            if isinstance(number, bool) or not isinstance(number, int) or number not in self.opened:
                raise GateRefused(f"PR {number!r} was not opened by this run through the gate")
            if op == "merge_pr":
                return self.board.merge_pr(number, merged_by=self.author)
            return self.board.pull_request(number)
        raise GateRefused(f"unknown op {op!r} (issue, create_pr, merge_pr, pull_request)")


def _text(req: dict[str, Any], key: str) -> str:
    value = req.get(key)
    if not isinstance(value, str):
        raise GateRefused(f"{key!r} must be a string")
    return value


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            return b'"request too large"'  # answered as a refusal, never read further
    return data.split(b"\n", 1)[0]


# -- the agent's side ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgeClient:
    """What an agent on the embedded board uses instead of the board file (the demo agent does)."""

    path: Path

    def _call(self, **req: object) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(CLIENT_TIMEOUT_S)
            try:
                s.connect(str(self.path))
                s.sendall(json.dumps(req).encode() + b"\n")
                raw = b"".join(iter(lambda: s.recv(65536), b""))
            except OSError as exc:
                raise BoardWriteError(f"forge gate {self.path}: {exc}") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise BoardWriteError(f"forge gate {self.path}: unreadable answer") from exc
        if not isinstance(answer, dict) or not answer.get("ok"):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise BoardWriteError(f"forge gate refused: {error or 'no answer'}")
        return answer.get("result")

    def issue(self, number: int | None = None) -> Issue | None:
        """This run's issue (the gate serves no other, whatever ``number`` says)."""
        data = self._call(op="issue")
        return None if data is None else _decode(Issue, data)

    def create_pr(self, branch: str, title: str, body: str, **_: object) -> PullRequest:
        return _decode(
            PullRequest, self._call(op="create_pr", branch=branch, title=title, body=body)
        )

    def merge_pr(self, number: int, **_: object) -> PullRequest:
        return _decode(PullRequest, self._call(op="merge_pr", number=number))

    def pull_request(self, number: int) -> PullRequest | None:
        data = self._call(op="pull_request", number=number)
        return None if data is None else _decode(PullRequest, data)

    def disconnect(self) -> None:
        """Nothing to close: one connection per call."""


def _decode(tp: type[T], data: object) -> T:
    try:
        return decode(tp, data)
    except CodecError as exc:
        raise BoardWriteError(f"forge gate: unexpected answer: {exc}") from exc
