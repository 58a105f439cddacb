"""The marker language: render/parse, and the rules that read an issue's markers (D6, D7, D8)."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.closing import has_live_keyword
from fleet.core.markers import (
    GLYPHS,
    HUMAN_KINDS,
    LATCHING,
    RED_BASELINE_FREE,
    TERMINAL,
    History,
    Kind,
    Marker,
    WordKind,
    _Reader,
    associations,
    histories,
    history,
    is_release,
    is_tombstone,
    markers_of,
    open_start,
    parked_until,
    parse,
    render,
)
from fleet.core.model import Comment, Event, EventKind, Issue, Policy, iso
from fleet.core.trust import DEFAULT_ASSOCIATIONS, Trust, fold
from tests.builders import (
    CLOSING_TEXT,
    FLEET,
    FRAGMENTS,
    HUMAN,
    NOW,
    T0,
    comment,
    issue,
    marker,
    release,
    reopen,
)

FAST = settings(max_examples=200, deadline=None)
KINDS = list(Kind)

# -- render / parse -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=[k.value for k in KINDS])
def test_every_kind_round_trips(kind: Kind) -> None:
    fields = {"run": "42-abc", "worker": "w1", "due": iso(NOW)}
    c = marker(kind, fields, "free text for humans\nsecond line")
    m = parse(c)
    assert m is not None
    assert (m.kind, dict(m.fields), m.note) == (kind, fields, "free text for humans\nsecond line")
    assert (m.at, m.comment_id, m.author) == (c.created_at, c.id, FLEET)
    assert c.body.startswith(f"{GLYPHS[kind]} fleet:{kind.value} ")


def test_every_kind_has_its_own_glyph() -> None:
    """D6: a marker must never be mistaken for another, so no two kinds share a glyph."""
    assert set(GLYPHS) == set(Kind)
    assert len(set(GLYPHS.values())) == len(GLYPHS)
    assert Kind.LEFT_OPEN in GLYPHS  # the marker that was once written without one


def test_terminal_and_latching_sets() -> None:
    assert Kind.START not in TERMINAL and Kind.PARK not in TERMINAL
    assert Kind.LEFT_OPEN not in TERMINAL | LATCHING  # non-terminal, non-latching (D6)
    assert {Kind.START, Kind.SUCCESS, Kind.BLOCKED, Kind.NO_OP} <= LATCHING  # predicate 6


NOT_MARKERS = {
    "wrong-glyph": "✔ fleet:start run=1",
    "start-glyph-on-success": "▶ fleet:success",
    "glyph-less": "fleet:start run=1",
    "glyph-less-left-open": "fleet:left-open",
    "unknown-kind": "▶ fleet:begin",
    "leading-space": " ▶ fleet:start",
    "two-spaces": "▶  fleet:start",
    "glyph-on-second-line": "hello\n▶ fleet:start",
    "quoted": "> ▶ fleet:start",
    "prose-after-kind": "▶ fleet:start because I said so",
    "uppercase-field": "▶ fleet:start Run=1",
    "empty": "",
}


@pytest.mark.parametrize("body", NOT_MARKERS.values(), ids=NOT_MARKERS.keys())
def test_not_a_marker(body: str) -> None:
    """A wrong glyph, or a glyph-less first line, is text (D6's invisible marker)."""
    assert parse(comment(body, author=FLEET)) is None


def test_crlf_first_line_and_trailing_blanks_parse() -> None:
    m = parse(comment("⏳ fleet:parked due=x \r\n\r\nnote", author=FLEET))
    assert m is not None and m.kind is Kind.PARKED and m.get("due") == "x" and m.note == "note"


def test_render_values_are_one_token_and_none_is_omitted() -> None:
    text = render(Kind.FAILED, {"reason": "exit 1\ttwice", "empty": "", "skip": None, "n": 3})
    m = parse(comment(text, author=FLEET))
    assert m is not None and dict(m.fields) == {"reason": "exit_1_twice", "empty": "-", "n": "3"}


def test_render_rejects_a_bad_field_name() -> None:
    with pytest.raises(ValueError, match="field name"):
        render(Kind.START, {"Run-Id": 1})


def test_markers_of_skips_text() -> None:
    cs = [marker(Kind.START), comment("lgtm"), marker(Kind.FAILED)]
    assert [m.kind for m in markers_of(cs)] == [Kind.START, Kind.FAILED]


# -- hypothesis: the parser ------------------------------------------------------------------------

FIELD_NAMES = st.from_regex(r"[a-z_]{1,8}", fullmatch=True)
TOKENS = st.from_regex(r"[A-Za-z0-9_.:+=/-]{1,20}", fullmatch=True)


@FAST
@given(
    st.sampled_from(KINDS),
    st.dictionaries(FIELD_NAMES, TOKENS, max_size=5),
    st.from_regex(r"[A-Za-z0-9 .,;()'-]*(\n[A-Za-z0-9 .,;()'-]*){0,3}", fullmatch=True),
)
def test_round_trip_recovers_kind_fields_and_note(kind, fields, note) -> None:
    m = parse(comment(render(kind, fields, note), author=FLEET))
    assert m is not None
    assert (m.kind, dict(m.fields), m.note) == (kind, fields, note.strip())


@FAST
@given(
    st.sampled_from(KINDS),
    st.dictionaries(FIELD_NAMES, st.one_of(st.text(), st.integers(), CLOSING_TEXT), max_size=5),
    st.one_of(st.text(), CLOSING_TEXT),
)
def test_any_field_value_or_note_keeps_the_marker_parseable(kind, fields, note) -> None:
    """Arbitrary values still parse as this kind with these keys; each value is one token."""
    m = parse(comment(render(kind, fields, note), author=FLEET))
    assert m is not None and m.kind is kind
    assert set(m.fields) == set(fields)
    assert all(v and not re.search(r"\s", v) for v in m.fields.values())


# A field value is one token, so its danger is a keyword at its very end meeting the note's start.
SHORT_CLOSING = st.lists(FRAGMENTS, min_size=1, max_size=3).map("".join)
NASTY_NOTES = ["Closes #12", "fixes: #3", "> resolves owner/repo#9", "#3 was the cause"]


@FAST
@given(
    st.sampled_from(KINDS),
    st.dictionaries(FIELD_NAMES, st.one_of(st.text(), CLOSING_TEXT, SHORT_CLOSING), max_size=2),
    st.one_of(st.text(), CLOSING_TEXT, st.sampled_from(NASTY_NOTES)),
)
def test_rendering_never_produces_a_live_closing_keyword(kind, fields, note) -> None:
    """D14: a PR that quotes a marker (in a blockquote, to refute it) must not close anything."""
    assert not has_live_keyword(render(kind, fields, note))


@pytest.mark.parametrize(
    ("fields", "note"),
    [
        ({}, "Closes #12"),
        ({}, "fixes: #3"),
        ({}, "> resolves owner/repo#9"),
        ({"why": "fixes"}, "#3 broke"),  # live only across the line break
        ({"why": "closes"}, "owner/repo#3"),
        ({"why": "Closes #12"}, ""),
    ],
    ids=["closes", "fixes-colon", "quoted", "field-then-note", "field-then-repo-note", "in-field"],
)
def test_rendering_defuses_named_cases(fields: dict[str, str], note: str) -> None:
    assert not has_live_keyword(render(Kind.FAILED, fields, note))


@FAST
@given(st.sampled_from(KINDS), st.text())
def test_a_rendered_note_never_releases(kind: Kind, note: str) -> None:
    """The fleet cannot release its own latch: no note line starts with the token."""
    body = render(kind, None, note + "\nfleet:release")
    assert not any(ln.startswith("fleet:release") for ln in body.split("\n"))


# -- the release token -----------------------------------------------------------------------------

RELEASES = {
    "alone": ("fleet:release", True),
    "line-two": ("thanks, go again\nfleet:release", True),
    "with-reason": ("fleet:release (flaky CI fixed)", True),
    "crlf": ("ok\r\nfleet:release", True),
    "mid-line": ("please fleet:release this", False),
    "quoted": ("> fleet:release", False),
    "indented": ("  fleet:release", False),
    "code-span": ("`fleet:release`", False),
    "longer-word": ("fleet:released", False),
    "hyphenated": ("fleet:release-all", False),
    "in-a-marker": (render(Kind.PARK, None, "fleet:release"), False),
}


@pytest.mark.parametrize(("body", "releases"), RELEASES.values(), ids=RELEASES.keys())
def test_release_token_only_at_the_start_of_a_line(body: str, releases: bool) -> None:
    """Seed 003, MVV 9: a bare substring match let the fleet's own template release the latch."""
    assert is_release(comment(body)) is releases


# -- the timeline: last word, reopen, tombstone ----------------------------------------------------


def test_last_word_is_the_latest_marker() -> None:
    h = history(issue(timeline=[marker(Kind.START), marker(Kind.FAILED)]), FLEET)
    assert h.last_marker is not None and h.last_marker.kind is Kind.FAILED


def test_order_is_by_time_not_by_list_position() -> None:
    late, early = marker(Kind.FAILED), marker(Kind.START)
    h = history(issue(timeline=[late, early]), FLEET)
    assert h.last_marker is not None and h.last_marker.kind is Kind.START


def test_reopen_outranks_every_older_marker() -> None:
    """D6: a reopen is an explicit 'not finished' written after the marker that said it was."""
    i = issue(timeline=[marker(Kind.START), marker(Kind.SUCCESS), reopen()])
    h = history(i, FLEET)
    assert h.last is not None and h.last.kind is WordKind.REOPEN
    assert h.last_marker is None and not is_tombstone(i, h)


def test_reopen_at_the_same_instant_as_the_marker_still_outranks_it() -> None:
    c = marker(Kind.SUCCESS)
    h = history(issue(timeline=[c, reopen(at=c.created_at)]), FLEET)
    assert h.last is not None and h.last.kind is WordKind.REOPEN


def test_a_marker_after_the_reopen_is_the_last_word_again() -> None:
    h = history(issue(timeline=[marker(Kind.SUCCESS), reopen(), marker(Kind.START)]), FLEET)
    assert open_start(h) is not None


def test_success_on_an_open_issue_is_a_tombstone() -> None:
    i = issue(timeline=[marker(Kind.START), marker(Kind.SUCCESS)])
    assert is_tombstone(i, history(i, FLEET))
    closed = issue(state="closed", timeline=[marker(Kind.SUCCESS)])
    assert not is_tombstone(closed, history(closed, FLEET))


def test_left_open_after_success_is_the_last_word() -> None:
    """D6's glyph lesson: the left-open marker must be visible, or the success stays last."""
    i = issue(timeline=[marker(Kind.START), marker(Kind.SUCCESS), marker(Kind.LEFT_OPEN)])
    h = history(i, FLEET)
    assert h.last_marker is not None and h.last_marker.kind is Kind.LEFT_OPEN
    assert not is_tombstone(i, h)
    glyphless = issue(timeline=[marker(Kind.SUCCESS), comment("fleet:left-open", author=FLEET)])
    assert is_tombstone(glyphless, history(glyphless, FLEET))


@pytest.mark.parametrize("kind", [Kind.SUCCESS, Kind.START, Kind.FAILED], ids=str)
def test_a_non_fleet_look_alike_is_ignored(kind: Kind) -> None:
    i = issue(timeline=[marker(Kind.FAILED), marker(kind, author=HUMAN)])
    h = history(i, FLEET)
    assert len(h.markers) == 1 and h.last_marker is not None and h.last_marker.kind is Kind.FAILED


def test_a_human_may_park() -> None:
    h = history(issue(timeline=[marker(Kind.PARK, author=HUMAN)]), FLEET)
    assert h.park is not None and h.park.author == HUMAN


def test_identity_none_reads_every_author() -> None:
    h = history(issue(timeline=[marker(Kind.SUCCESS, author=HUMAN)]), None)
    assert h.last_marker is not None


# -- attempts (D1, D7, D8) -------------------------------------------------------------------------

S, F, C, P = Kind.START, Kind.FAILED, Kind.CAPACITY, Kind.PARKED
ATTEMPTS = {
    "none": ([], 0),
    "one-failed": ([S, F], 1),
    "three-failed": ([S, F, S, F, S, F], 3),
    "start-without-terminal": ([S], 1),
    "orphan-then-another": ([S, S, F], 2),
    "capacity-death-is-free": ([S, C, S, C, S, C], 0),
    "capacity-between-failures": ([S, F, S, C, S, F], 2),
    "retry-park-is-free": ([S, P, S, P, S, F], 1),
    "reaped-counts": ([S, Kind.REAPED], 1),
    "timed-out-counts": ([S, Kind.TIMED_OUT], 1),
    "garbled-counts": ([S, Kind.GARBLED], 1),
    "success-counts": ([S, Kind.SUCCESS, Kind.LEFT_OPEN], 1),
    "left-open-is-not-a-terminal": ([S, Kind.LEFT_OPEN, C], 0),
    "a-superseded-duplicate-is-given-back": ([S, S, Kind.STOPPED, Kind.SUPERSEDED, F], 1),
    "superseded-then-failed-again": ([S, S, Kind.STOPPED, Kind.SUPERSEDED, F, S, F], 2),
}


@pytest.mark.parametrize(("kinds", "attempts"), ATTEMPTS.values(), ids=ATTEMPTS.keys())
def test_attempts_are_counted_from_the_issues_own_markers(kinds: list[Kind], attempts: int) -> None:
    h = history(issue(timeline=[marker(k) for k in kinds]), FLEET)
    assert h.attempts == attempts
    assert h.retries == kinds.count(P)


def test_each_capacity_death_names_the_worker_its_start_named() -> None:
    """D8's own bound reads these names; a start that named none is "-". Only since a release."""
    runs = [marker(S, {"worker": "old"}), marker(C), release()]
    runs += [marker(S, {"worker": "a"}), marker(C), marker(S), marker(C)]
    runs += [marker(S, {"worker": "b"}), marker(F)]
    assert history(issue(timeline=runs), FLEET).capacity == ("a", "-")


def test_a_humans_start_look_alike_spends_nothing() -> None:
    h = history(issue(timeline=[marker(S, author=HUMAN), marker(F, author=HUMAN)]), FLEET)
    assert h.attempts == 0


@pytest.mark.parametrize(
    "reset",
    [reopen, release, lambda: release("done looking\nfleet:release")],
    ids=["reopen", "release", "release-on-line-two"],
)
def test_budget_resets_after_reopen_or_release(reset) -> None:
    runs = [marker(k) for k in (S, F, S, F, S, F)]
    h = history(issue(timeline=[*runs, reset(), marker(S), marker(F)]), FLEET)
    assert h.attempts == 1


@pytest.mark.parametrize(
    "fake", ["> fleet:release", "please fleet:release", "`fleet:release`"], ids=str
)
def test_a_quoted_or_mid_line_token_does_not_reset_the_budget(fake: str) -> None:
    runs = [marker(k) for k in (S, F, S, F, S, F)]
    assert history(issue(timeline=[*runs, release(fake)]), FLEET).attempts == 3


# -- park latch and retry parks (D7, predicate 8) --------------------------------------------------


@pytest.mark.parametrize(
    ("after", "parked"),
    [
        ([], True),
        ([release], False),
        ([reopen], False),
        ([lambda: release("> fleet:release")], True),
        ([lambda: release("let me fleet:release it")], True),
        ([release, lambda: marker(Kind.PARK, author=HUMAN)], True),
    ],
    ids=["latched", "released", "reopened", "quoted", "mid-line", "parked-again"],
)
def test_park_latch(after: list, parked: bool) -> None:
    """Builders are called here, in order, so each one happens after the park."""
    timeline = [marker(Kind.PARK, author=HUMAN), *(build() for build in after)]
    assert (history(issue(timeline=timeline), FLEET).park is not None) is parked


@pytest.mark.parametrize(
    ("due", "expected"),
    [
        (iso(NOW + timedelta(minutes=2)), NOW + timedelta(minutes=2)),
        (iso(T0), T0),
        ("2025-01-01T00:00:00Z", T0),
        ("soon", None),
        ("9999-12-31T23:59:59-23:59", None),
        (None, None),
    ],
    ids=["future", "past", "z-suffix", "garbage", "overflows-utc", "missing"],
)
def test_parked_until(due: str | None, expected) -> None:
    """An unreadable due time fails open (D5): it never holds the item."""
    h = history(issue(timeline=[marker(S), marker(P, {"due": due})]), FLEET)
    assert parked_until(h) == expected


def test_parked_until_only_when_the_park_is_the_last_word() -> None:
    due = {"due": iso(NOW + timedelta(hours=1))}
    assert parked_until(history(issue(timeline=[marker(P, due), reopen()]), FLEET)) is None
    assert parked_until(history(issue(timeline=[marker(P, due), marker(S)]), FLEET)) is None


def test_parse_reads_the_created_at_of_the_comment() -> None:
    c = Comment(7, FLEET, render(Kind.START), T0)
    m = parse(c)
    assert m is not None and m.at == T0 and m.comment_id == 7


# -- the derivation against a reference, and the memo against a fresh reading ----------------------

GITHUB = Policy(
    identity="fleet-bot",
    trust=Trust.of(associations=DEFAULT_ASSOCIATIONS, allow=["friend"], agent_logins=["agent-bot"]),
)
POLICIES = [Policy(), GITHUB, Policy(trust=Trust.of(allow=["octocat"]))]
# Everyone else: a human, a trusted friend, an agent, nobody, and the other policies' identities.
OTHERS = [HUMAN, "friend", "agent-bot", "", FLEET, "fleet-bot"]
ASSOCIATIONS = st.sampled_from([None, "MEMBER", "NONE", "OWNER"])
# A run's kinds and a hold weigh more than the rest: starts meet starts, terminals, parks, releases.
RUN_KINDS = [
    Kind.START,
    Kind.START,
    Kind.FAILED,
    Kind.CAPACITY,
    Kind.PARKED,
    Kind.SUPERSEDED,
    Kind.PARK,
]
MARKER_BODIES = st.builds(
    render,
    st.sampled_from(KINDS + RUN_KINDS * 3),
    st.fixed_dictionaries(
        {"worker": st.sampled_from(["a", "b", None])},  # None: render leaves the field out
        optional={"baseline": st.sampled_from(["red", "green"])},
    ),
)
TEXT_BODIES = st.sampled_from(
    ["fleet:release", "ok\nfleet:release", "> fleet:release", "lgtm", "fleet: hi"]
)
# A few instants only, so ties between comments and with reopens are common; the comments' order
# in the tuple is drawn apart from their times, so some boards hand them out of order.
INSTANTS = st.integers(0, 6).map(lambda k: T0 + timedelta(minutes=k))


@st.composite
def readings(draw) -> tuple[Issue, Policy]:
    """A random issue and the policy that reads it; the policy's identity (in another case too)
    writes half the comments, three in four of them markers: runs are its words."""
    p = draw(st.sampled_from(POLICIES))
    authors = st.one_of(st.sampled_from([p.identity, p.identity.upper()]), st.sampled_from(OTHERS))
    bodies = st.one_of(MARKER_BODIES, MARKER_BODIES, MARKER_BODIES, TEXT_BODIES)
    comments = st.builds(Comment, st.integers(1, 10**6), authors, bodies, INSTANTS, ASSOCIATIONS)
    kinds = st.sampled_from([EventKind.REOPENED, EventKind.LABELED])
    base = issue(draw(st.integers(1, 4)))
    i = replace(
        base,
        comments=tuple(draw(st.lists(comments, min_size=4, max_size=16))),
        events=tuple(draw(st.lists(st.builds(Event, kinds, INSTANTS, authors), max_size=3))),
        author=draw(authors),
        author_association=draw(ASSOCIATIONS),
    )
    return i, p


def reference(i: Issue, p: Policy) -> tuple[object, ...]:
    """The rules as this module's docstring states them, one at a time, remembering nothing: every
    entry sorted by time (a reopen after a comment of the same instant), the budget read from the
    window after the last release or reopen, each start settled by the next terminal or start."""
    entries: list[tuple[datetime, int, WordKind, Marker | None]] = []
    ignored: list[tuple[str, str, datetime, str, int | None]] = []
    for c in i.comments:
        m = parse(c)
        if m is not None:
            why = (
                None
                if c.author.casefold() == p.identity.casefold()
                else p.trust.steering(c.author, c.association, p.identity)
                if m.kind in HUMAN_KINDS
                else "a status marker counts only from the fleet's own identity"
            )
            if why is None:
                entries.append((c.created_at, 0, WordKind.MARKER, m))
            else:
                what = m.kind.value if m.kind in HUMAN_KINDS else "marker"
                ignored.append((what, c.author, c.created_at, why, c.id))
        elif is_release(c):
            why = p.trust.steering(c.author, c.association, p.identity)
            if why is None:
                entries.append((c.created_at, 0, WordKind.RELEASE, None))
            else:
                ignored.append(("release", c.author, c.created_at, why, c.id))
    shown = associations(i)
    for e in i.events:
        if e.kind is EventKind.REOPENED:
            why = p.trust.steering(e.actor, shown.get(fold(e.actor)), p.identity)
            if why is None:
                entries.append((e.at, 1, WordKind.REOPEN, None))
            else:
                ignored.append(("reopen", e.actor, e.at, why, None))
    entries.sort(key=lambda t: (t[0], t[1]))
    words = [(kind, at, m) for at, _, kind, m in entries]
    cut = max((k + 1 for k, w in enumerate(words) if w[0] is not WordKind.MARKER), default=0)
    window = [m for _, _, m in words[cut:] if m is not None]
    attempts = retries = red = 0
    capacity = []
    for k, m in enumerate(window):
        retries += m.kind is Kind.PARKED
        if m.kind is not Kind.START:
            continue
        ends = [n.kind for n in window[k + 1 :] if n.kind in TERMINAL or n.kind is Kind.START]
        end = ends[0] if ends else None
        if end is Kind.CAPACITY:
            capacity.append(m.get("worker") or "-")
        elif end is Kind.PARKED:
            pass
        elif end in (Kind.FAILED, Kind.TIMED_OUT) and m.get("baseline") == "red":
            red += 1
        else:
            attempts += 1
    attempts += max(0, red - RED_BASELINE_FREE)
    attempts = max(0, attempts - sum(m.kind is Kind.SUPERSEDED for m in window))
    parks = [m for m in window if m.kind is Kind.PARK]
    return (
        words,
        [m for _, _, m in words if m is not None],
        attempts,
        retries,
        red,
        capacity,
        parks[-1] if parks else None,
        ignored,
    )


def observed(h: History) -> tuple[object, ...]:
    assert h.last == (h.words[-1] if h.words else None)
    return (
        [(w.kind, w.at, w.marker) for w in h.words],
        list(h.markers),
        h.attempts,
        h.retries,
        h.red_failures,
        list(h.capacity),
        h.park,
        [(g.what, g.author, g.at, g.why, g.comment_id) for g in h.ignored],
    )


# More examples than FAST: a rule of the fold shows only in some orders of a run's markers.
@settings(max_examples=500, deadline=None)
@given(readings())
def test_history_agrees_with_the_reference_reading(read: tuple[Issue, Policy]) -> None:
    i, p = read
    assert observed(history(i, p)) == reference(i, p)


@FAST
@given(readings(), readings())
def test_a_remembered_history_is_the_one_a_fresh_reading_gives(
    read: tuple[Issue, Policy], another: tuple[Issue, Policy]
) -> None:
    """Read once, then read again into new objects (a board read each cycle): the answer is the
    fresh one. An issue of the same number with other comments gets its own, never the first's."""
    (i, p), other = read, another[0]
    first = history(i, p)
    assert history(copy.deepcopy(i), p) == first == _Reader(p.identity, p.trust).derive(i)
    same_number = replace(other, number=i.number)
    assert history(same_number, p) == _Reader(p.identity, p.trust).derive(same_number)
    assert history(i, p) == first


@FAST
@given(st.lists(readings(), max_size=6))
def test_a_board_read_at_once_is_each_issue_read_alone(reads: list[tuple[Issue, Policy]]) -> None:
    """``histories`` compares a board a block at a time; each answer is still the issue's own."""
    p = reads[0][1] if reads else Policy()
    board = [i for i, _ in reads]
    assert histories(board, p) == [_Reader(p.identity, p.trust).derive(i) for i in board]
    assert histories(copy.deepcopy(board), p) == [history(i, p) for i in board]
