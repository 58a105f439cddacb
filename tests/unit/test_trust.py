"""Issue 16's rules on the pure core: who gives the fleet work, steers it, and is named when ignored.

Each rule is run under both boards' trust: GitHub's (authorAssociation counted, default OWNER,
MEMBER, COLLABORATOR, plus an allow list) with every association GitHub records, and the embedded
board's allow list (no associations at all). A stranger's halt issue, release line, hold and issue
are each ignored and named; a release posted as an agent login or as the fleet itself is ignored; a
collaborator's of each works.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.core.authority import approval_wait, halt_issues, sort_mentions
from fleet.core.markers import Kind, history, is_release, parse
from fleet.core.markers import render as render_marker
from fleet.core.model import Comment, Event, EventKind, Issue, Mention, Policy
from fleet.core.notices import notices, posted
from fleet.core.select import fresh_hold, select
from fleet.core.trust import ASSOCIATIONS, DEFAULT_ASSOCIATIONS, Trust, is_approval
from fleet.views.status import render
from tests.builders import FLEET, NOW, comment, issue, marker, reopen, snapshot, tick

GITHUB = Policy(
    identity="fleet-bot",
    trust=Trust.of(
        associations=DEFAULT_ASSOCIATIONS, allow=["Trusted-Friend"], agent_logins=["agent-bot"]
    ),
)
LOCAL = Policy(trust=Trust.of(allow=["alice"], agent_logins=["agent"]))

UNTRUSTED = ("NONE", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "CONTRIBUTOR", "MANNEQUIN")
TRUSTED = ("COLLABORATOR", "MEMBER", "OWNER")


def said(body: str, author: str, association: str | None) -> Comment:
    return replace(comment(body, author=author), association=association)


def by(i: Issue, author: str, association: str | None) -> Issue:
    return replace(i, author=author, author_association=association)


def fleet_marker(kind: Kind, policy: Policy) -> Comment:
    return marker(kind, author=policy.identity)


# -- the rule itself --------------------------------------------------------------------------------


@pytest.mark.parametrize("association", ASSOCIATIONS)
def test_github_trusts_exactly_the_counted_associations(association: str) -> None:
    verdict = GITHUB.trust.distrust("someone", association)
    assert (verdict is None) == (association in TRUSTED)
    if verdict is not None:
        assert f"association {association}" in verdict


def test_the_allow_list_is_case_insensitive_and_agents_are_never_trusted() -> None:
    assert GITHUB.trust.trusts("trusted-friend", "NONE")
    assert LOCAL.trust.trusts("ALICE", None)
    assert not LOCAL.trust.trusts("mallory", None)
    assert "agent login" in (GITHUB.trust.distrust("Agent-Bot", "OWNER") or "")
    assert "agent login" in (LOCAL.trust.distrust("agent", None) or "")


def test_the_embedded_default_trusts_everyone_but_agents_and_the_fleet_never_steers() -> None:
    default = Policy(trust=Trust.of(agent_logins=["agent"]))
    assert default.trust.trusts("anyone", None)
    assert not default.trust.trusts("agent", None)
    assert default.trust.steering(FLEET, None, FLEET) is not None
    assert default.trust.steering("anyone", None, FLEET) is None


@given(st.text(max_size=40))
def test_approval_counts_only_at_the_start_of_a_line(prefix: str) -> None:
    quoted = f"> fleet:approve {prefix}"
    assert not is_approval(quoted)
    assert is_approval(f"{prefix}\nfleet:approve")
    assert not is_approval("fleet:approved")


# -- steering: release, reopen, hold ----------------------------------------------------------------


def _exhausted(policy: Policy, then: Callable[[], Comment] | None = None) -> Issue:
    """An issue whose attempt budget is spent, then ``then()`` (built after, so it is later)."""
    runs = [fleet_marker(k, policy) for k in (Kind.START, Kind.FAILED) * policy.attempt_cap]
    return issue(7, timeline=[*runs, *([then()] if then else [])])


@pytest.mark.parametrize("association", ASSOCIATIONS)
def test_a_release_counts_only_from_a_trusted_author_on_github(association: str) -> None:
    i = _exhausted(GITHUB, lambda: said("fleet:release", "someone", association))
    h = history(i, GITHUB)
    if association in TRUSTED:
        assert h.attempts == 0 and not h.ignored
    else:
        assert h.attempts == GITHUB.attempt_cap
        (ignored,) = h.ignored
        assert ignored.what == "release" and "someone" in ignored.line()


@pytest.mark.parametrize(
    ("author", "association", "counts"),
    [
        ("alice", None, True),
        ("mallory", None, False),
        ("agent", None, False),
        (FLEET, None, False),
    ],
)
def test_a_release_on_the_embedded_board_follows_its_allow_list(
    author: str, association: str | None, counts: bool
) -> None:
    h = history(_exhausted(LOCAL, lambda: said("fleet:release", author, association)), LOCAL)
    assert (h.attempts == 0) is counts
    assert bool(h.ignored) is not counts


def test_a_release_posted_as_an_agent_login_or_the_fleet_never_releases() -> None:
    for who, assoc in (("agent-bot", "OWNER"), ("fleet-bot", "MEMBER")):
        h = history(_exhausted(GITHUB, lambda w=who, a=assoc: said("fleet:release", w, a)), GITHUB)
        assert h.attempts == GITHUB.attempt_cap
        assert h.ignored[0].what == "release"


def test_a_reopen_counts_only_from_an_actor_the_issue_shows_trusted() -> None:
    latched = [fleet_marker(Kind.START, GITHUB), fleet_marker(Kind.SUCCESS, GITHUB)]
    stranger = by(issue(3, timeline=[*latched, reopen(actor="author")]), "author", "NONE")
    h = history(stranger, GITHUB)
    assert h.last_marker is not None and h.last_marker.kind is Kind.SUCCESS
    assert h.ignored[0].what == "reopen"
    # A collaborator who commented on the issue is known trusted; their reopen counts.
    helper = said("looking", "helper", "COLLABORATOR")
    known = issue(3, timeline=[*latched, helper, reopen(actor="helper")])
    assert history(known, GITHUB).last is not None
    assert history(known, GITHUB).last.kind.value == "reopen"
    # An actor nobody can place is not trusted on GitHub, unless allow-listed.
    assert history(issue(3, timeline=[*latched, reopen(actor="ghost")]), GITHUB).ignored
    allowed = issue(3, timeline=[*latched, reopen(actor="trusted-friend")])
    assert not history(allowed, GITHUB).ignored


def test_a_strangers_hold_is_ignored_and_named_a_collaborators_holds() -> None:
    park = marker(Kind.PARK, author="stranger")
    h = history(issue(4, timeline=[replace(park, association="NONE")]), GITHUB)
    assert h.park is None and h.ignored[0].what == "park"
    mine = marker(Kind.PARK, author="maintainer")
    assert history(issue(4, timeline=[replace(mine, association="MEMBER")]), GITHUB).park


def test_a_strangers_status_marker_look_alike_is_named_not_obeyed() -> None:
    fake = replace(marker(Kind.CANCELLED, author="stranger"), association="NONE")
    h = history(issue(5, timeline=[fake]), GITHUB)
    assert h.last_marker is None
    assert h.ignored[0].what == "cancelled"
    real = replace(marker(Kind.CANCELLED, author="maintainer"), association="OWNER")
    last = history(issue(5, timeline=[real]), GITHUB).last_marker
    assert last is not None and last.kind is Kind.CANCELLED


# -- work: predicate 12 -----------------------------------------------------------------------------


@pytest.mark.parametrize("association", ASSOCIATIONS)
def test_a_strangers_issue_waits_for_approval_and_a_collaborators_runs(association: str) -> None:
    i = by(issue(9), "someone", association)
    plan = select(snapshot(i, policy=GITHUB))
    if association in TRUSTED:
        assert [d.issue for d in plan.dispatch] == [9]
    else:
        w = plan.reason_for(9)
        assert w is not None and (w.predicate, w.state) == (12, "unapproved")
        assert "someone" in w.reason and "fleet:approve" in w.reason


def test_a_trusted_approval_makes_a_strangers_issue_work_an_untrusted_one_does_not() -> None:
    stranger = by(issue(9), "someone", "NONE")
    self_approved = replace(stranger, comments=(said("fleet:approve", "someone", "NONE"),))
    w = select(snapshot(self_approved, policy=GITHUB)).reason_for(9)
    assert w is not None and w.state == "unapproved" and "approval ignored" in w.reason
    by_agent = replace(stranger, comments=(said("fleet:approve", "agent-bot", "OWNER"),))
    assert select(snapshot(by_agent, policy=GITHUB)).reason_for(9) is not None
    approved = replace(stranger, comments=(said("lgtm\nfleet:approve", "maint", "MEMBER"),))
    assert [d.issue for d in select(snapshot(approved, policy=GITHUB)).dispatch] == [9]


def test_an_approval_older_than_the_bodys_last_edit_approves_nothing() -> None:
    ok = said("fleet:approve", "maint", "MEMBER")
    edited = replace(by(issue(9), "someone", "NONE"), comments=(ok,), body_edited_at=tick())
    why = approval_wait(edited, GITHUB)
    assert why is not None and "predates the last edit of the body or title" in why
    again = replace(edited, comments=(ok, said("fleet:approve", "maint", "MEMBER")))
    assert approval_wait(again, GITHUB) is None


def test_an_approval_older_than_a_rename_approves_nothing() -> None:
    ok = said("fleet:approve", "maint", "MEMBER")
    renamed = Event(EventKind.RENAMED, tick(), "someone")
    i = replace(by(issue(9), "someone", "NONE"), comments=(ok,), events=(renamed,))
    assert "predates the last edit" in (approval_wait(i, GITHUB) or "")
    again = replace(i, comments=(ok, said("fleet:approve", "maint", "MEMBER")))
    assert approval_wait(again, GITHUB) is None


def test_the_embedded_board_with_an_allow_list_holds_others_work() -> None:
    plan = select(
        snapshot(by(issue(1), "alice", None), by(issue(2), "mallory", None), policy=LOCAL)
    )
    assert [d.issue for d in plan.dispatch] == [1]
    w = plan.reason_for(2)
    assert w is not None and w.predicate == 12


def test_dispatch_re_asks_approval_and_the_markers_on_its_fresh_read() -> None:
    assert fresh_hold(by(issue(9), "someone", "NONE"), GITHUB, NOW).predicate == 12  # type: ignore[union-attr]
    spent = by(_exhausted(GITHUB), "maint", "OWNER")
    assert fresh_hold(spent, GITHUB, NOW).predicate == 7  # type: ignore[union-attr]
    started = by(issue(9, timeline=[fleet_marker(Kind.START, GITHUB)]), "maint", "OWNER")
    assert fresh_hold(started, GITHUB, NOW).predicate == 6  # type: ignore[union-attr]
    assert fresh_hold(by(issue(9), "maint", "OWNER"), GITHUB, NOW) is None


# -- the halt issue ---------------------------------------------------------------------------------


@pytest.mark.parametrize("association", ASSOCIATIONS)
def test_a_halt_issue_halts_only_from_a_trusted_author(association: str) -> None:
    h = by(issue(2, "HALT FLEET", body="stop"), "someone", association)
    plan = select(snapshot(h, by(issue(3), "maint", "MEMBER"), policy=GITHUB))
    if association in TRUSTED:
        assert plan.halts and not plan.dispatch
    else:
        assert not plan.halts and [d.issue for d in plan.dispatch] == [3]
        (ignored,) = halt_issues([h], GITHUB)[1]
        assert ignored.issue == 2 and "someone" in ignored.line()


def test_fleet_status_names_each_ignored_attempt() -> None:
    halt = by(issue(2, "HALT FLEET"), "mallory", None)
    spent = _exhausted(LOCAL, lambda: said("fleet:release", "mallory", None))
    snap = snapshot(
        halt, replace(spent, author="alice"), by(issue(8), "mallory", None), policy=LOCAL
    )
    text = render(snap, select(snap), None, 300)
    assert "NOT OBEYED — halt issue #2 by mallory ignored" in text
    assert "NOT OBEYED — release by mallory ignored" in text
    assert "#8     unapproved   p12" in text


# -- notices: named once, inert when quoted back ----------------------------------------------------


def test_a_notice_names_the_attempt_is_no_marker_and_releases_nothing() -> None:
    bad = said("fleet:release", "mallory", None)
    i = replace(_exhausted(LOCAL, lambda: bad), author="alice")
    snap = snapshot(i, by(issue(2, "HALT FLEET"), "mallory", None), policy=LOCAL)
    found = notices(snap)
    assert [(n.issue, n.key) for n in found] == [(2, "halt-2"), (7, f"comment-{bad.id}")]
    text = found[1].text()
    posted_by_fleet = comment(text, author=FLEET)
    assert parse(posted_by_fleet) is None and not is_release(posted_by_fleet)
    assert not any(ln.startswith(("fleet:release", "fleet:approve")) for ln in text.splitlines())
    assert not posted(i, found[1], FLEET)
    again = replace(i, comments=(*i.comments, posted_by_fleet))
    assert posted(again, found[1], FLEET)
    forged = replace(i, comments=(*i.comments, comment(text, author="mallory")))
    assert not posted(forged, found[1], FLEET)  # only the fleet's own comment counts
    assert history(again, LOCAL).attempts == LOCAL.attempt_cap


@pytest.mark.parametrize("association", ASSOCIATIONS)
def test_only_a_trusted_authors_mention_reaches_a_brief(association: str) -> None:
    m = Mention(1, 9, "someone", "@fleet-bot do this", NOW, association=association)
    agent = Mention(2, 9, "agent-bot", "@fleet-bot more attempts", NOW, association="OWNER")
    kept, dropped = sort_mentions([m, agent], GITHUB)
    assert [k.id for k in kept] == ([1] if association in TRUSTED else [])
    assert [(d.id, "agent login" in why) for d, why in dropped][-1] == (2, True)


# -- the safety property: nothing an untrusted author writes moves the fleet -------------------------

_BODIES = st.sampled_from(
    ["fleet:release", "fleet:approve", "+1", "> fleet:release", "HALT FLEET", "@fleet-bot go"]
    + [render_marker(k, {"run": "x"}) for k in Kind]
)
_BASE = st.lists(st.sampled_from([Kind.START, Kind.FAILED, Kind.CANCELLED, Kind.PARK]), max_size=6)


_PLAIN = st.sampled_from(["fleet:release", "fleet:approve", "+1", "@fleet-bot go"])
_NOISE = st.one_of(
    st.tuples(_BODIES, st.sampled_from(["stranger", "agent-bot"])),
    st.tuples(_PLAIN, st.just("fleet-bot")),  # the fleet's own words count only as markers
)


@given(_BASE, st.lists(_NOISE, max_size=6), st.booleans())
def test_nothing_an_untrusted_author_writes_changes_a_decision(
    base: list[Kind], noise: list[tuple[str, str]], reopened: bool
) -> None:
    trusted = by(issue(5, timeline=[fleet_marker(k, GITHUB) for k in base]), "maint", "MEMBER")
    extra = [said(body, who, "OWNER" if who != "stranger" else "NONE") for body, who in noise]
    events = (reopen(actor="stranger"),) if reopened else ()
    noisy = replace(trusted, comments=trusted.comments + tuple(extra), events=events)
    before, after = history(trusted, GITHUB), history(noisy, GITHUB)
    assert (after.attempts, after.park, after.last_marker) == (
        before.attempts, before.park, before.last_marker
    )  # fmt: skip
    plan = select(snapshot(trusted, policy=GITHUB))
    again = select(snapshot(noisy, policy=GITHUB))
    assert (again.dispatch, again.waiting, again.halts) == (plan.dispatch, plan.waiting, plan.halts)
