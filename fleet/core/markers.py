"""The marker language: status comments on an issue, and the rules that read them.

A marker is a comment whose FIRST line is ``<glyph> fleet:<kind> key=value ...``; the rest of the
comment is free text for humans. Eligibility reads the **last** marker (D6), so every writer of a
marker is a writer of the queue: each kind has its own glyph, and a first line whose glyph does not
match its keyword is not a marker at all (D6's glyph-less marker was invisible; a marker must never
be mistaken for another).

Rules implemented here, all pure:

- the last word on an issue is its latest marker, **unless a reopen event or a release token came
  later** — a reopen outranks every older marker (D6), a release clears a latch;
- the attempt count is derived from the issue's own markers since the last reopen/release, never
  from a state file (D1); a run whose terminal was a capacity death does not spend it (D8), nor does
  one parked for a retry (it provably never started, D7) — those are counted as retries — nor a
  duplicate that oldest-wins repair stopped (one superseded marker gives one start back, D4);
- the release token counts only at the start of a line (seed 003, MVV 9), so the template text
  that explains it does not release anything when quoted back;
- a release, a reopen and a human's hold (park) or cancel marker count only from a trusted human
  (``fleet.core.trust``): never from the fleet's own identity nor an agent login. What did not count is
  kept in ``History.ignored`` with its reason, so ``fleet-status`` names it instead of obeying it;
- rendering never produces a live closing keyword (D14).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from fleet.core.closing import defuse
from fleet.core.model import Comment, EventKind, Issue, Policy, parse_iso
from fleet.core.trust import EVERYONE, Trust, fold


class Kind(StrEnum):
    START = "start"
    SUCCESS = "success"
    NO_OP = "no-op"
    FAILED = "failed"
    BLOCKED = "blocked"
    CAPACITY = "capacity"
    STOPPED = "stopped"  # an external signal: claims nothing about the work (D12)
    TIMED_OUT = "timed-out"  # the unit's run-time limit was reached (a named outcome, not a hang)
    TURN_LIMIT = "turn-limit"  # the run reached policy.max_turns (D13): a bounded stuck task
    GARBLED = "garbled"  # the agent's output held no readable result envelope
    REAPED = "reaped"  # an orphaned start reset by the reaper (D14)
    SUPERSEDED = "superseded"  # a duplicate unit stopped by oldest-wins repair (D4); not a failure
    CANCELLED = "cancelled"  # an operator's cancel: no retry, no recovery
    PARKED = "parked"  # a retry parked until ``due`` (D7)
    PARK = "park"  # a hold latch until a release token
    LEFT_OPEN = "left-open"  # finished but deliberately left open: non-terminal, has a glyph (D6)
    PR_OPEN = "pr-open"  # the run ended with an open PR: not finished (D2)
    CROSS_REPO = "cross-repo"  # merged in another repository; the issue not closed by it (D6)
    DO_NOT_DISPATCH = "do-not-dispatch"  # pre-flight check 3's one comment


GLYPHS: Mapping[Kind, str] = {
    Kind.START: "▶",
    Kind.SUCCESS: "✔",
    Kind.NO_OP: "○",
    Kind.FAILED: "✘",
    Kind.BLOCKED: "⛔",
    Kind.CAPACITY: "◐",
    Kind.STOPPED: "■",
    Kind.TIMED_OUT: "⌛",
    Kind.TURN_LIMIT: "⟲",
    Kind.GARBLED: "⁇",
    Kind.REAPED: "♻",
    Kind.SUPERSEDED: "⇢",
    Kind.CANCELLED: "⊘",
    Kind.PARKED: "⏳",
    Kind.PARK: "⏸",
    Kind.LEFT_OPEN: "◇",
    Kind.PR_OPEN: "⇄",
    Kind.CROSS_REPO: "⤳",
    Kind.DO_NOT_DISPATCH: "⚑",
}

# Predicate 6: a last word of these kinds keeps the issue off the queue until a reopen or release.
# Seed 003 names start, success, block and no-op; cancelled, pr-open, cross-repo and the
# do-not-dispatch notice are the same kind of latch (a human must look before another run).
LATCHING = frozenset(
    {
        Kind.START,
        Kind.SUCCESS,
        Kind.BLOCKED,
        Kind.NO_OP,
        Kind.CANCELLED,
        Kind.PR_OPEN,
        Kind.CROSS_REPO,
        Kind.DO_NOT_DISPATCH,
    }
)
# Markers that end a run (the terminal a start is waiting for, D12).
TERMINAL = frozenset(
    {
        Kind.SUCCESS,
        Kind.NO_OP,
        Kind.FAILED,
        Kind.BLOCKED,
        Kind.CAPACITY,
        Kind.STOPPED,
        Kind.TIMED_OUT,
        Kind.TURN_LIMIT,
        Kind.GARBLED,
        Kind.REAPED,
        Kind.SUPERSEDED,
        Kind.CANCELLED,
        Kind.PARKED,
        Kind.PR_OPEN,
        Kind.CROSS_REPO,
    }
)

RELEASE_TOKEN = "fleet:release"
_RELEASE = re.compile(rf"^{re.escape(RELEASE_TOKEN)}(?![\w-])", re.MULTILINE)
_FIRST = re.compile(r"^(?P<glyph>\S+) fleet:(?P<kind>[a-z-]+)(?P<fields>(?: [a-z_]+=\S*)*)[ \t]*$")
_FIELD = re.compile(r" ([a-z_]+)=(\S*)")
_BY_KEYWORD = {k.value: k for k in Kind}


@dataclass(frozen=True)
class Marker:
    kind: Kind
    fields: Mapping[str, str]
    at: datetime
    comment_id: int
    author: str
    note: str = ""

    def get(self, key: str) -> str | None:
        return self.fields.get(key)


def _clean(value: object) -> str:
    """A field value is one token: no whitespace, no live closing reference (D14)."""
    text = re.sub(r"\s+", "_", str(value))
    return defuse(text) or "-"


def render(kind: Kind, fields: Mapping[str, object] | None = None, note: str = "") -> str:
    """The comment text of a marker. Field values and the note are defused (D14)."""
    first = f"{GLYPHS[kind]} fleet:{kind.value}"
    for key, value in (fields or {}).items():
        if not re.fullmatch(r"[a-z_]+", key):
            raise ValueError(f"marker field name {key!r} must match [a-z_]+")
        if value is None:
            continue
        first += f" {key}={_clean(value)}"
    body = defuse(note.strip())
    # A note line must never start with the release token: the fleet cannot release its own latch.
    body = "\n".join(("> " + ln) if _RELEASE.match(ln) else ln for ln in body.splitlines())
    # Defused once more as a whole: a last field value ending in a keyword ("a=fixes") and a note
    # opening with a reference ("#3 ...") are each inert alone but live across the line break.
    return first if not body else defuse(f"{first}\n\n{body}")


# Each comment's marker is parsed once per process: a sweep's select reads every comment of every
# open issue, and a long-lived reader (``fleet-status --watch``, the demo's drain, a bench) reads
# the same comments again each cycle. The key is the comment itself (a frozen value: an edited
# body is another key), so a hit is exactly what a fresh parse would return. Cleared when full:
# the board the design is sized for, 10,000 open issues x 20 comments, fits twice; the entries
# hold comments the snapshot holds anyway, plus one Marker each (a few hundred bytes).
_PARSED: dict[Comment, Marker | None] = {}
PARSE_CACHE_MAX = 400_000


def parse(comment: Comment) -> Marker | None:
    """The marker a comment carries, or None. The glyph must match the keyword."""
    try:
        return _PARSED[comment]
    except KeyError:
        pass
    except TypeError:  # a comment with an unhashable field (a test double): parse it every time
        return _parse(comment)
    if len(_PARSED) >= PARSE_CACHE_MAX:
        _PARSED.clear()
    marker = _PARSED[comment] = _parse(comment)
    return marker


def _parse(comment: Comment) -> Marker | None:
    if " fleet:" not in comment.body:  # most comments are people's words: no regex for them
        return None
    first, _, rest = comment.body.partition("\n")
    m = _FIRST.match(first.rstrip("\r"))
    if not m:
        return None
    kind = _BY_KEYWORD.get(m.group("kind"))
    if kind is None or GLYPHS[kind] != m.group("glyph"):
        return None
    fields = dict(_FIELD.findall(m.group("fields")))
    return Marker(kind, fields, comment.created_at, comment.id, comment.author, rest.strip())


def is_release(comment: Comment) -> bool:
    """A release token at the start of a line, in a comment that is not itself a marker."""
    return parse(comment) is None and _RELEASE.search(comment.body) is not None


# -- the timeline ----------------------------------------------------------------------------------


class WordKind(StrEnum):
    MARKER = "marker"
    REOPEN = "reopen"
    RELEASE = "release"


@dataclass(frozen=True)
class Word:
    """One entry of an issue's history that eligibility reads: a marker, a reopen or a release."""

    kind: WordKind
    at: datetime
    marker: Marker | None = None


# Markers a trusted human may post by hand: a hold (park) and a cancel request (both latches).
HUMAN_KINDS = frozenset({Kind.PARK, Kind.CANCELLED})


@dataclass(frozen=True)
class Ignored:
    """Board input that tried to steer the fleet and was not obeyed, and why (issue 16)."""

    what: str  # release | reopen | park | cancelled | marker
    author: str
    at: datetime
    why: str
    comment_id: int | None = None

    def line(self) -> str:
        return f"{self.what} by {self.author or '?'} ignored: {self.why}"


@dataclass(frozen=True)
class History:
    """What the markers of one issue say, derived fresh every cycle (D1: no state file)."""

    words: tuple[Word, ...]
    markers: tuple[Marker, ...]
    last: Word | None
    attempts: int  # runs that spent the attempt budget since the last reopen/release
    retries: int  # retry parks since the last reopen/release (D7)
    park: Marker | None  # an unreleased hold latch (predicate 8)
    notes: tuple[str, ...] = field(default=())
    # The worker of each run that ended in a capacity marker since the last reopen/release, oldest
    # first ("-" when its start named none): free of the attempt budget (D8), bounded on their own.
    capacity: tuple[str, ...] = field(default=())
    ignored: tuple[Ignored, ...] = ()  # steering from someone the fleet does not listen to
    # Runs started on a red CI baseline (start marker ``baseline=red``) that ended failed or timed
    # out since the last reopen/release: free of the budget up to RED_BASELINE_FREE (check 7).
    red_failures: int = 0

    @property
    def last_marker(self) -> Marker | None:
        if self.last is None or self.last.kind is not WordKind.MARKER:
            return None
        return self.last.marker

    def last_of(self, *kinds: Kind) -> Marker | None:
        for m in reversed(self.markers):
            if m.kind in kinds:
                return m
        return None


def same_login(a: str, b: str) -> bool:
    """GitHub logins are case-insensitive (``Fleet-Bot`` and ``fleet-bot`` are one account), so
    every comparison of an author with the fleet's identity goes through here: a case difference
    must not make the fleet ignore its own markers (attempt cap, "already running")."""
    return a.casefold() == b.casefold()


def associations(issue: Issue) -> dict[str, str | None]:
    """What this issue tells about each author's association (GitHub): the issue's own author and
    every commenter. Events carry none, so a reopen's actor is judged by what the issue shows."""
    known: dict[str, str | None] = {}
    if issue.author:
        known[fold(issue.author)] = issue.author_association
    for c in issue.comments:
        if c.association is not None or fold(c.author) not in known:
            known[fold(c.author)] = c.association
    return known


def _words(issue: Issue, identity: str | None, trust: Trust) -> tuple[list[Word], list[Ignored]]:
    entries: list[tuple[datetime, int, Word]] = []
    ignored: list[Ignored] = []

    def steers(who: str, association: str | None) -> str | None:
        return trust.steering(who, association, identity or "")

    for c in issue.comments:
        marker = parse(c)
        if marker is not None:
            if identity is None or same_login(c.author, identity):
                entries.append((c.created_at, 0, Word(WordKind.MARKER, c.created_at, marker)))
                continue
            # A status marker counts only from the fleet's own identity; a hold (park) or a
            # cancel may be posted by a trusted human. Anyone else's look-alike is text.
            why = (
                steers(c.author, c.association)
                if marker.kind in HUMAN_KINDS
                else "a status marker counts only from the fleet's own identity"
            )
            if why is None:
                entries.append((c.created_at, 0, Word(WordKind.MARKER, c.created_at, marker)))
            else:
                what = marker.kind.value if marker.kind in HUMAN_KINDS else "marker"
                ignored.append(Ignored(what, c.author, c.created_at, why, c.id))
        elif is_release(c):  # the parse above is memoized: no second parse
            why = steers(c.author, c.association)
            if why is None:
                entries.append((c.created_at, 0, Word(WordKind.RELEASE, c.created_at)))
            else:
                ignored.append(Ignored("release", c.author, c.created_at, why, c.id))
    known = associations(issue) if any(e.kind is EventKind.REOPENED for e in issue.events) else {}
    for e in issue.events:
        if e.kind is EventKind.REOPENED:
            why = steers(e.actor, known.get(fold(e.actor)))
            if why is None:
                entries.append((e.at, 1, Word(WordKind.REOPEN, e.at)))
            else:
                ignored.append(Ignored("reopen", e.actor, e.at, why))
    entries.sort(key=lambda t: (t[0], t[1]))
    return [w for _, _, w in entries], ignored


# Check 7 is advisory (seed 003): a run started on a red CI baseline whose run ended in one of these
# spends no attempt — the seed's incident is runs on a red main stamped failed for correct work.
RED_CAUSED = frozenset({Kind.FAILED, Kind.TIMED_OUT})
# How many such failures are free per issue (per reopen/release) before they count again: a bound
# on the burn loop while main stays red (D13: the attempt cap bounds wasted starts). Not measured:
# a guess equal to the default attempt cap, so a red spell can at most double an issue's wasted
# runs. The reading that would settle it: how many red-baseline failures later succeed on green.
RED_BASELINE_FREE = 3


def history(issue: Issue, policy: Policy | str | None = None) -> History:
    """Read an issue's markers, reopens and releases into a :class:`History`.

    ``policy`` gives the fleet's identity and its trust rule; a bare identity trusts every human
    (the embedded board's default) but still never lets the fleet release itself.
    """
    if isinstance(policy, Policy):
        identity: str | None = policy.identity
        trust = policy.trust
    else:
        identity, trust = policy, EVERYONE
    words, ignored = _words(issue, identity, trust)
    markers = tuple(w.marker for w in words if w.marker is not None)
    last = words[-1] if words else None
    # Attempts and retries are counted since the last reopen or release: a human's explicit
    # "not finished" / "go again" gives the issue a fresh budget.
    since = 0
    for i, w in enumerate(words):
        if w.kind is not WordKind.MARKER:
            since = i + 1
    window = [w.marker for w in words[since:] if w.marker is not None]
    attempts, retries, red, capacity = _spent(window)
    return History(
        tuple(words),
        markers,
        last,
        attempts,
        retries,
        _park(words),
        (),
        capacity,
        tuple(ignored),
        red,
    )


def _spent(window: list[Marker]) -> tuple[int, int, int, tuple[str, ...]]:
    """What the runs since the last reopen or release spent: (attempts, retry parks, red-baseline
    failures, the worker of each capacity death)."""
    attempts = retries = red = 0
    capacity: list[str] = []
    for i, m in enumerate(window):
        if m.kind is Kind.PARKED:
            retries += 1
        if m.kind is not Kind.START:
            continue
        terminal = next(
            (n for n in window[i + 1 :] if n.kind in TERMINAL or n.kind is Kind.START), None
        )
        if terminal is not None and terminal.kind is Kind.CAPACITY:
            capacity.append(m.get("worker") or "-")
        if terminal is not None and terminal.kind in (Kind.CAPACITY, Kind.PARKED):
            continue  # D8: a capacity death is not the work's failure; D7: a parked retry never ran
        if m.get("baseline") == "red" and terminal is not None and terminal.kind in RED_CAUSED:
            red += 1  # check 7: the failure may be the red baseline's, not the agent's
            continue
        attempts += 1
    attempts += max(0, red - RED_BASELINE_FREE)
    # Each superseded marker names one duplicate unit that oldest-wins repair stopped (D4): its
    # start was the fleet's mistake, not an attempt at the work, so it is given back.
    attempts = max(0, attempts - sum(1 for m in window if m.kind is Kind.SUPERSEDED))
    return attempts, retries, red, tuple(capacity)


def _park(words: list[Word]) -> Marker | None:
    """The hold latch (predicate 8): the last park that no later release or reopen lifted."""
    park: Marker | None = None
    for w in words:
        if w.marker is not None and w.marker.kind is Kind.PARK:
            park = w.marker
        elif w.kind in (WordKind.RELEASE, WordKind.REOPEN):
            park = None
    return park


def parked_until(h: History) -> datetime | None:
    """The due time of a retry park that is the last word, if any (D7)."""
    m = h.last_marker
    if m is None or m.kind is not Kind.PARKED:
        return None
    try:
        return parse_iso(m.get("due"))
    except (ValueError, OverflowError):
        # An unreadable due time does not hold the item (fails open, D5); OverflowError is a
        # well-formed date whose offset pushes it past year 9999 when converted to UTC.
        return None


def is_tombstone(issue: Issue, h: History) -> bool:
    """A success marker as the last word on an issue that is still open (D6)."""
    m = h.last_marker
    return issue.is_open and m is not None and m.kind is Kind.SUCCESS


def open_start(h: History) -> Marker | None:
    """The last start marker when no terminal followed it: a run in flight, or an orphan."""
    m = h.last_marker
    return m if m is not None and m.kind is Kind.START else None


def markers_of(comments: Iterable[Comment]) -> tuple[Marker, ...]:
    return tuple(m for m in (parse(c) for c in comments) if m is not None)
