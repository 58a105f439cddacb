"""HTTP to GitHub: authentication, rate limits, outages, and the type of every answer checked.

The board's rules about the wire live here so ``github.py`` can speak in issues:

- **Rate limits are honoured, within a bound** (the issue: "primary and secondary limits
  honoured"). A 403/429 with ``Retry-After`` waits that long; one with ``x-ratelimit-remaining: 0``
  waits until ``x-ratelimit-reset``; a secondary limit with neither waits a minute and doubles; a
  GraphQL ``RATE_LIMITED`` error (HTTP 200) is the same thing in another envelope. Past the bound
  a read raises :class:`ReadRateLimited` (a :class:`BoardUnreadable`: --apply fails closed, D5)
  and a write :class:`WriteRateLimited` (a :class:`BoardWriteError`).
- **A write that may have landed is never blindly repeated.** A POST that timed out or met a 5xx
  might have created the comment; posting it again would double a start marker and spend an
  attempt (predicate 7). Only a rate-limit refusal, which GitHub did not process, is retried.
- **Check the JSON type before trusting it** (D5): an error body is a JSON object too.
- **The token never leaves this module**: it sits in the client's headers, and neither ``repr``
  nor any error message names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from fleet.board.base import BoardError, BoardUnreadable, BoardWriteError
from fleet.core.model import parse_iso

# Retries of one call after a rate limit or outage. Three waits cover GitHub's documented
# secondary-limit advice (wait a minute, then back off) without turning one cycle into an hour.
MAX_RETRIES = 3
# Total seconds one call may sleep. Below the scheduler's 300 s timer period (fleet.core.model.Policy),
# so a rate-limited cycle ends before the next one starts instead of stacking behind it.
MAX_TOTAL_WAIT_S = 180.0
# GitHub's advice for a secondary limit that names no wait: "wait for at least one minute".
SECONDARY_WAIT_S = 60.0
# A transient 5xx or network failure of an idempotent call: retried after 2, 4, 8 s.
OUTAGE_WAIT_S = 2.0
# Per-request timeout: a board page of 50 items answers in a few seconds; a hung socket must not
# hold the scheduler past its period.
TIMEOUT_S = 30.0
# The REST version every shape in tests/fixtures/github was recorded against.
API_VERSION = "2022-11-28"
_MESSAGE_CHARS = 200  # how much of GitHub's error message an exception carries
_RATE_LIMIT_TYPES = {"RATE_LIMITED", "RATE_LIMIT"}  # both spellings are seen in the wild


class RateLimitExceeded(BoardError):
    """GitHub kept refusing for rate limits past the retry bound."""


class ReadRateLimited(RateLimitExceeded, BoardUnreadable):
    """A read gave up on rate limits: the queue is unreadable this cycle."""


class WriteRateLimited(RateLimitExceeded, BoardWriteError):
    """A write gave up on rate limits: it did not take."""


class GraphQLErrors(BoardError):
    """GitHub answered a GraphQL document with ``errors``; ``errors`` holds them as sent."""

    def __init__(self, message: str, errors: list[Any]) -> None:
        super().__init__(message)
        self.errors = errors


class ReadGraphQLErrors(GraphQLErrors, BoardUnreadable):
    """A read answered with errors: never read as an empty answer (D5)."""


class WriteGraphQLErrors(GraphQLErrors, BoardWriteError):
    """A mutation answered with errors: it did not take."""


@dataclass(frozen=True)
class RateLimit:
    """GraphQL's own account of one call (``rateLimit { cost remaining resetAt }``)."""

    cost: int
    remaining: int
    reset_at: datetime | None


def graphql_url(api_url: str) -> str:
    """GitHub.com serves GraphQL at ``/graphql``; GitHub Enterprise Server at ``/api/graphql``."""
    base = api_url.rstrip("/")
    return base[: -len("/v3")] + "/graphql" if base.endswith("/api/v3") else base + "/graphql"


def message_of(body: Any) -> str:
    """GitHub's error message from a body of any JSON type, shortened; '' when there is none. A
    422's ``errors[]`` (``resource``, ``field``, ``code``, sometimes ``message``) is the useful
    part of "Validation Failed", so it is kept."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        details = [_detail(e) for e in body.get("errors") or () if isinstance(e, dict | str)]
        text = body["message"] + (f" ({'; '.join(d for d in details if d)})" if details else "")
        return text[:_MESSAGE_CHARS]
    if isinstance(body, dict) and isinstance(body.get("errors"), list):
        parts = [e.get("message", "") for e in body["errors"] if isinstance(e, dict)]
        return "; ".join(str(p) for p in parts)[:_MESSAGE_CHARS]
    return ""


def _detail(error: Any) -> str:
    """One entry of a REST ``errors[]``: ``resource.field code: message`` as far as given."""
    if isinstance(error, str):
        return error
    where = ".".join(str(error[k]) for k in ("resource", "field") if error.get(k))
    parts = [p for p in (where, str(error.get("code") or ""), str(error.get("message") or "")) if p]
    return " ".join(parts[:2]) + (f": {parts[2]}" if len(parts) > 2 else "")


def _op(document: str) -> str:
    """The operation's name, for messages: ``query BoardPage(...)`` -> ``query BoardPage``."""
    return document.split("(", 1)[0].split("{", 1)[0].strip() or "graphql"


def json_of(response: httpx.Response) -> Any:
    """The body as JSON, or ``None`` when it is empty or not JSON."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def rate_limit_wait(response: httpx.Response, body: Any, attempt: int, now: float) -> float | None:
    """Seconds to wait before retrying ``response``, or None when it is not a rate limit.

    GitHub's documented order: ``Retry-After`` first; then ``x-ratelimit-remaining: 0`` with the
    epoch in ``x-ratelimit-reset``; then, for a secondary limit naming neither, a minute doubled per
    attempt. A 403 that is none of these is a permission error and is not retried.
    """
    headers = response.headers
    graphql_limited = (
        response.status_code == 200
        and isinstance(body, dict)
        and isinstance(body.get("errors"), list)
        and any(isinstance(e, dict) and e.get("type") in _RATE_LIMIT_TYPES for e in body["errors"])
    )
    if response.status_code not in (403, 429) and not graphql_limited:
        return None
    retry_after = headers.get("retry-after", "")
    if retry_after.strip().isdigit():
        return float(retry_after)
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") == "0" and reset.strip().isdigit():
        return max(1.0, float(reset) - now + 1.0)
    if graphql_limited or "secondary rate limit" in message_of(body).lower():
        return SECONDARY_WAIT_S * (2**attempt)
    if response.status_code == 429:
        return SECONDARY_WAIT_S * (2**attempt)
    return None


class GitHubHTTP:
    """One authenticated client for REST and GraphQL with the rules above."""

    def __init__(
        self,
        *,
        token: str,
        api_url: str,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.graphql_url = graphql_url(self.api_url)
        self._client = client if client is not None else httpx.Client(timeout=TIMEOUT_S)
        self._auth = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "fleet",
        }
        self._sleep = sleep
        self._clock = clock
        self.last_rate_limit: RateLimit | None = None
        # Run once before the first write (the board's identity check); it stays armed until it
        # passes, so a failed check stops every later write too.
        self.before_first_write: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"GitHubHTTP(api_url={self.api_url!r})"

    def owns(self, url: str) -> bool:
        """True when ``url`` is on our API host: the token is sent nowhere else."""
        return url == self.api_url or url.startswith(self.api_url + "/")

    # -- one call, retried within the bound ------------------------------------------------------

    def send(
        self,
        method: str,
        url: str,
        *,
        write: bool,
        json: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> tuple[httpx.Response, Any]:
        """Send one request; return the final response and its JSON body (any status)."""
        if not self.owns(url) and url != self.graphql_url:
            raise (BoardWriteError if write else BoardUnreadable)(f"refusing to send to {url}")
        if write and self.before_first_write is not None:
            self.before_first_write()  # raises to refuse the write
            self.before_first_write = None
        idempotent = method in ("GET", "PUT", "PATCH", "DELETE") or (
            method == "POST" and url == self.graphql_url and not write
        )
        waited = 0.0
        for attempt in range(MAX_RETRIES + 1):
            reason: str
            try:
                response = self._client.request(
                    method, url, json=json, params=params, headers=self._auth
                )
            except httpx.TransportError as exc:
                if not idempotent:
                    raise self._fail(write, f"{method} {url}: {type(exc).__name__}") from None
                wait, reason = OUTAGE_WAIT_S * (2**attempt), type(exc).__name__
            else:
                body = json_of(response)
                limited = rate_limit_wait(response, body, attempt, self._clock())
                if limited is not None:
                    wait, reason = (
                        limited,
                        f"rate limited ({message_of(body) or response.status_code})",
                    )
                elif response.status_code in (502, 503, 504) and idempotent:
                    wait, reason = OUTAGE_WAIT_S * (2**attempt), f"HTTP {response.status_code}"
                else:
                    return response, body
            if attempt == MAX_RETRIES or waited + wait > MAX_TOTAL_WAIT_S:
                text = f"{method} {url}: {reason}; gave up after {attempt + 1} attempt(s)"
                if reason.startswith("rate limited"):
                    raise (WriteRateLimited if write else ReadRateLimited)(text)
                raise self._fail(write, text)
            self._sleep(wait)
            waited += wait
        raise AssertionError("unreachable: the loop returns or raises")

    @staticmethod
    def _fail(write: bool, message: str) -> BoardError:
        return BoardWriteError(message) if write else BoardUnreadable(message)

    # -- REST ------------------------------------------------------------------------------------

    def rest(
        self,
        method: str,
        path: str,
        *,
        write: bool,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        ok: tuple[int, ...] = (200, 201),
        missing_ok: bool = False,
    ) -> Any:
        """A REST call that must answer one of ``ok``; returns the JSON body.

        ``missing_ok``: a 404 returns None (e.g. "this issue has no parent") instead of raising.
        """
        url = path if path.startswith(("http://", "https://")) else self.api_url + path
        response, body = self.send(method, url, write=write, json=json, params=params)
        if response.status_code in ok:
            return body
        if missing_ok and response.status_code == 404:
            return None
        detail = message_of(body) or "no message"
        raise self._fail(write, f"{method} {path}: HTTP {response.status_code}: {detail}")

    # -- GraphQL ---------------------------------------------------------------------------------

    def graphql(
        self,
        document: str,
        variables: Mapping[str, Any],
        *,
        write: bool = False,
        not_found_ok: bool = False,
    ) -> dict[str, Any]:
        """Run one document; return ``data``. Any ``errors`` raise, so an error is never read as
        an empty answer (D5). ``not_found_ok`` lets NOT_FOUND errors through (with their nulls in
        ``data``) for "is there such an issue?"."""
        data, errors = self.graphql_partial(document, variables, write=write)
        tolerable = not_found_ok and all(e.get("type") == "NOT_FOUND" for e in errors)
        if errors and not tolerable:
            cls = WriteGraphQLErrors if write else ReadGraphQLErrors
            raise cls(f"{_op(document)}: {message_of({'errors': errors}) or 'errors'}", errors)
        return data

    def graphql_partial(
        self, document: str, variables: Mapping[str, Any], *, write: bool = False
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Run one document; return ``data`` and the ``errors`` GitHub answered beside it.

        GitHub answers a document partly: an item the token may not read comes back ``null`` at
        its ``path`` with an error naming that path (FORBIDDEN, NOT_FOUND, SAML enforcement), and
        the rest of ``data`` is whole. The caller decides which paths it can do without; an answer
        with no ``data`` object at all still raises.
        """
        payload = {"query": document, "variables": dict(variables)}
        response, body = self.send("POST", self.graphql_url, write=write, json=payload)
        op = _op(document)
        if response.status_code != 200 or not isinstance(body, dict):
            detail = message_of(body) or "no JSON object"
            raise self._fail(write, f"{op}: HTTP {response.status_code}: {detail}")
        raw = body.get("errors") or []
        errors = [e if isinstance(e, dict) else {"message": str(e)}
                  for e in (raw if isinstance(raw, list) else [raw])]  # fmt: skip
        data = body.get("data")
        if not isinstance(data, dict):
            if errors:
                cls = WriteGraphQLErrors if write else ReadGraphQLErrors
                raise cls(f"{op}: {message_of(body) or 'errors'}", errors)
            raise self._fail(write, f"{op}: answer has no data object")
        self._note_rate_limit(data.get("rateLimit"))
        return data, errors

    def _note_rate_limit(self, value: Any) -> None:
        if isinstance(value, dict) and isinstance(value.get("cost"), int):
            remaining = value.get("remaining")
            reset = value.get("resetAt")
            self.last_rate_limit = RateLimit(
                cost=value["cost"],
                remaining=remaining if isinstance(remaining, int) else -1,
                reset_at=parse_iso(reset) if isinstance(reset, str) else None,
            )
