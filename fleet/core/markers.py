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
from itertools import chain

from fleet.core.closing import defuse
from fleet.core.issue_memo import IssueMemo
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


# Each marker's first line is parsed once per process: a sweep's select reads every comment of every
# open issue, and a long-lived reader (``fleet-status --watch``, the demo's drain, a bench) reads
# the same comments again each cycle, into new objects. What the parse reads is the body alone, so
# the key is the body (a str: hashed and compared in C, its hash cached in the object); the comment's
# id, author and time are put into the Marker after the look-up. Only bodies that name ``fleet:``
# are held. Cleared when full: the board the design is sized for, 10,000 open issues x 20 comments,
# fits twice; each entry is a body the snapshot holds anyway, plus its parts: the kind's keyword,
# the note, then each field's name and value. Strings only, in one flat tuple, so the collector
# stops tracking an entry at its first look: a cold sweep holds one per marker body, and each
# object still tracked is one more for every full collection to walk. Each Marker gets its own dict.
_Parts = tuple[str, ...]
_PARTS: dict[str, _Parts | None] = {}
PARSE_CACHE_MAX = 400_000
_TOKEN = "fleet:"  # in every marker's first line and every release line: its absence rules out both


def parse(comment: Comment) -> Marker | None:
    """The marker a comment carries, or None. The glyph must match the keyword."""
    parts = _parts(comment.body)
    if parts is None:
        return None
    at, cid, author = comment.created_at, comment.id, comment.author
    return Marker(_BY_KEYWORD[parts[0]], _fields(parts), at, cid, author, parts[1])


def _parts(body: str) -> _Parts | None:
    """The parts of the marker ``body`` carries (see ``_Parts``), or None; memoized by the body."""
    if " fleet:" not in body:  # most comments are people's words: no regex and no entry for them
        return None
    try:
        return _PARTS[body]
    except KeyError:
        pass
    except TypeError:  # a body that is not a str (a test double): read it every time
        return _read(body)
    if len(_PARTS) >= PARSE_CACHE_MAX:
        _PARTS.clear()
    parts = _PARTS[body] = _read(body)
    return parts


def _read(body: str) -> _Parts | None:
    first, _, rest = body.partition("\n")
    m = _FIRST.match(first.rstrip("\r"))
    if not m:
        return None
    kind = _BY_KEYWORD.get(m.group("kind"))
    if kind is None or GLYPHS[kind] != m.group("glyph"):
        return None
    return (kind.value, rest.strip(), *chain.from_iterable(_FIELD.findall(m.group("fields"))))


def _fields(parts: _Parts) -> dict[str, str]:
    return dict(zip(parts[2::2], parts[3::2], strict=True))


def is_release(comment: Comment) -> bool:
    """A release token at the start of a line, in a comment that is not itself a marker."""
    return _releases(comment.body)


def _releases(body: str) -> bool:
    return _parts(body) is None and _RELEASE.search(body) is not None


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

    markers: tuple[Marker, ...]  # every marker that counts, in time order
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
    # Each release and reopen that counts, as (its place among the words, its kind, when): with the
    # markers, the words. Kept apart so a History holds no Word per marker — a sweep holds every
    # open issue's History, and each object it holds is one more for every full collection to walk.
    turns: tuple[tuple[int, WordKind, datetime], ...] = ()

    @property
    def words(self) -> tuple[Word, ...]:
        """Every marker, release and reopen that counts, in time order."""
        markers, turns = iter(self.markers), iter(self.turns)
        turn = next(turns, None)
        out: list[Word] = []
        for k in range(len(self.markers) + len(self.turns)):
            if turn is not None and turn[0] == k:
                out.append(Word(turn[1], turn[2]))
                turn = next(turns, None)
            else:
                m = next(markers)
                out.append(Word(WordKind.MARKER, m.at, m))
        return tuple(out)

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


# Check 7 is advisory (seed 003): a run started on a red CI baseline whose run ended in one of these
# spends no attempt — the seed's incident is runs on a red main stamped failed for correct work.
RED_CAUSED = frozenset({Kind.FAILED, Kind.TIMED_OUT})
# How many such failures are free per issue (per reopen/release) before they count again: a bound
# on the burn loop while main stays red (D13: the attempt cap bounds wasted starts). Not measured:
# a guess equal to the default attempt cap, so a red spell can at most double an issue's wasted
# runs. The reading that would settle it: how many red-baseline failures later succeed on green.
RED_BASELINE_FREE = 3


# The memo's bounds. A fleet reads with one identity and trust rule; a few more (a test's, a command's
# override) fit, and more than READERS_MAX means something builds policies in a loop: start over.
READERS_MAX = 16
# The design's board is 10,000 open issues: twice that fits, so a sweep never clears its own cycle.
HISTORY_MEMO_MAX = 20_000
# Distinct (author, association) pairs one fleet has weighed; a board's commenters are far fewer.
VERDICTS_MAX = 10_000

# Markers whose arrival settles the run of an earlier start: its terminal, or the next start when it
# never posted one (then the earlier run spent an attempt: D13's orphan, the reaper's business).
_ENDS_A_RUN = TERMINAL | {Kind.START}


class _Reader:
    """How one fleet — its identity and trust rule — reads issues. It remembers what that reading
    gives, keyed by everything the answer depends on: each author's steering verdict by (login,
    association), and each issue's History by the issue's comments, events and author
    (:class:`fleet.core.issue_memo.IssueMemo`)."""

    def __init__(self, identity: str | None, trust: Trust) -> None:
        self.identity = identity
        self.trust = trust
        self.histories: IssueMemo[History] = IssueMemo(HISTORY_MEMO_MAX)
        self._verdicts: dict[tuple[str, str | None], str | None] = {}

    def owns(self, author: str) -> bool:
        """A marker by this author counts (``same_login``; equal strings need no case fold)."""
        identity = self.identity
        return identity is None or author == identity or same_login(author, identity)

    def steers(self, who: str, association: str | None) -> str | None:
        """``Trust.steering`` of this fleet, remembered per (login, association)."""
        key = (who, association)
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable association (a test double): weigh it every time
            return self.trust.steering(who, association, self.identity or "")
        if len(self._verdicts) >= VERDICTS_MAX:
            self._verdicts.clear()
        why = self._verdicts[key] = self.trust.steering(who, association, self.identity or "")
        return why

    def derive(self, issue: Issue) -> History:
        words, ignored = self._words(issue)
        return _fold(words, ignored)

    def _words(self, issue: Issue) -> tuple[list[_Step], list[Ignored]]:
        """The markers, releases and reopens that count, in time order; and what did not count."""
        words: list[_Step] = []
        ignored: list[Ignored] = []
        in_order = True
        latest: datetime | None = None
        for c in issue.comments:
            body = c.body
            if _TOKEN not in body:  # people's words: neither a marker nor a release
                continue
            at = c.created_at
            parts = _parts(body)
            if parts is not None:
                kind = _BY_KEYWORD[parts[0]]
                if not self.owns(c.author):
                    # A status marker counts only from the fleet's own identity; a hold (park) or a
                    # cancel may be posted by a trusted human. Anyone else's look-alike is text.
                    human = kind in HUMAN_KINDS
                    why = (
                        self.steers(c.author, c.association)
                        if human
                        else "a status marker counts only from the fleet's own identity"
                    )
                    if why is not None:
                        ignored.append(
                            Ignored(kind.value if human else "marker", c.author, at, why, c.id)
                        )
                        continue
                word: _Step = Marker(kind, _fields(parts), at, c.id, c.author, parts[1])
            elif _releases(body):  # is_release's own rule; the parse above is memoized
                why = self.steers(c.author, c.association)
                if why is not None:
                    ignored.append(Ignored("release", c.author, at, why, c.id))
                    continue
                word = (at, WordKind.RELEASE)
            else:
                continue
            if latest is not None and at < latest:
                in_order = False
            latest = at
            words.append(word)
        reopens = [e for e in issue.events if e.kind is EventKind.REOPENED]
        if reopens:
            known = associations(issue)
            for e in reopens:
                why = self.steers(e.actor, known.get(fold(e.actor)))
                if why is None:
                    words.append((e.at, WordKind.REOPEN))
                    in_order = False
                else:
                    ignored.append(Ignored("reopen", e.actor, e.at, why))
        if not in_order:
            # Both boards hand comments in time order (the local board by id, GitHub sorted by
            # time), so this runs for a reopen or a board that did not. Stable, comments before
            # events: equal times keep their board order, and a reopen comes after a comment of the
            # same instant (it outranks the marker it answers, D6).
            words.sort(key=_when)
        return words, ignored


# One word while an issue is read: a marker, or (when, release | reopen).
_Step = Marker | tuple[datetime, WordKind]


def _when(step: _Step) -> tuple[datetime, bool]:
    if isinstance(step, Marker):
        return step.at, False
    return step[0], step[1] is WordKind.REOPEN


def _fold(words: list[_Step], ignored: list[Ignored]) -> History:
    """One pass over the words in time order. A release or a reopen — a human's explicit "go again"
    or "not finished" — starts the count afresh: attempts, retries, capacity deaths and red-baseline
    failures are those since the last one, and it lifts the hold latch (predicate 8)."""
    markers: list[Marker] = []
    attempts = retries = red = superseded = 0
    capacity: list[str] = []
    start: Marker | None = None  # the last start whose run has not ended yet
    park: Marker | None = None  # the last hold no release or reopen lifted
    turns: list[tuple[int, WordKind, datetime]] = []
    for k, m in enumerate(words):
        if not isinstance(m, Marker):
            turns.append((k, m[1], m[0]))
            attempts = retries = red = superseded = 0
            capacity = []
            start = park = None
            continue
        markers.append(m)
        kind = m.kind
        if start is not None and kind in _ENDS_A_RUN:
            if kind is Kind.CAPACITY:
                capacity.append(start.get("worker") or "-")  # D8: not the work's failure
            elif kind is Kind.PARKED:
                pass  # D7: a parked retry provably never ran
            elif kind in RED_CAUSED and start.get("baseline") == "red":
                red += 1  # check 7: the failure may be the red baseline's, not the agent's
            else:
                attempts += 1
            start = None
        if kind is Kind.START:
            start = m
        elif kind is Kind.PARKED:
            retries += 1
        elif kind is Kind.SUPERSEDED:
            superseded += 1
        elif kind is Kind.PARK:
            park = m
    if start is not None:
        attempts += 1  # no terminal yet: a run in flight, or an orphan, has spent its attempt
    attempts += max(0, red - RED_BASELINE_FREE)
    # Each superseded marker names one duplicate unit that oldest-wins repair stopped (D4): its
    # start was the fleet's mistake, not an attempt at the work, so it is given back.
    attempts = max(0, attempts - superseded)
    last = words[-1] if words else None
    return History(
        tuple(markers),
        None
        if last is None
        else Word(WordKind.MARKER, last.at, last)
        if isinstance(last, Marker)
        else Word(last[1], last[0]),
        attempts,
        retries,
        park,
        (),
        tuple(capacity),
        tuple(ignored),
        red,
        tuple(turns),
    )


_READERS: dict[tuple[str | None, Trust], _Reader] = {}
# The policy object of the last call and its reader: a sweep asks with one policy for every issue,
# and a Trust's dataclass hash is a Python call per look-up; `is` is not.
_last: tuple[object, _Reader | None] = (object(), None)


def _reader(policy: Policy | str | None) -> _Reader:
    global _last
    last_policy, last_reader = _last
    if policy is last_policy and last_reader is not None:
        return last_reader
    if isinstance(policy, Policy):
        identity: str | None = policy.identity
        trust = policy.trust
    else:
        identity, trust = policy, EVERYONE
    try:
        reader = _READERS.get((identity, trust))
    except TypeError:  # an unhashable trust rule (a test double): a reader for this call only
        return _Reader(identity, trust)
    if reader is None:
        if len(_READERS) >= READERS_MAX:
            _READERS.clear()
        reader = _READERS[(identity, trust)] = _Reader(identity, trust)
    _last = (policy, reader)
    return reader


def history(issue: Issue, policy: Policy | str | None = None) -> History:
    """Read an issue's markers, reopens and releases into a :class:`History`.

    ``policy`` gives the fleet's identity and its trust rule; a bare identity trusts every human
    (the embedded board's default) but still never lets the fleet release itself. A History is a
    value: an issue equal in its comments, events and author to one read before gets the answer
    computed then (``_Reader``).
    """
    reader = _reader(policy)
    return reader.histories.recall(issue, reader.derive)


def histories(issues: Iterable[Issue], policy: Policy | str | None = None) -> list[History]:
    """``[history(i, policy) for i in issues]`` for a whole board: the memo compares the board a
    block of issues at a time (fleet.core.issue_memo), so a board read again costs the comparison."""
    reader = _reader(policy)
    return reader.histories.recall_all(issues, reader.derive)


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
