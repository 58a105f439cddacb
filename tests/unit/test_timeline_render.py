"""The page as text: board text only ever escaped, links only to the board's own issue pages."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.core.markers import Kind
from fleet.timeline.model import build
from fleet.timeline.render import esc, page
from tests.builders import FLEET, issue, marker

T = datetime(2026, 1, 1, tzinfo=UTC)


def _tl(title: str, link: str | None = None):
    runs = [
        marker(Kind.START, {"run": "r1", "worker": "w1"}, at=T),
        marker(Kind.FAILED, {"run": "r1"}, title, at=T + timedelta(seconds=30)),
    ]
    return build(
        [issue(7, title, timeline=runs)],
        [],
        now=T + timedelta(seconds=60),
        since=T - timedelta(hours=1),
        identity=FLEET,
        link=link,
    )


def test_a_bar_links_to_its_issue_on_the_board_where_the_board_has_pages():
    text = page(_tl("Fix it", "https://github.com/o/r/issues/{n}"))
    assert (
        '<a href="https://github.com/o/r/issues/7" target="_blank" rel="noopener noreferrer"'
        in text
    )
    assert "<a " not in page(_tl("Fix it"))  # the embedded board has no pages: no link at all


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [name for name, _v in attrs]


def _parsed(text: str) -> _Tags:
    p = _Tags()
    # Python's parser reads <title> as raw text (HTML's rule); inside SVG a browser parses it as
    # markup, so it is parsed as an ordinary element here too.
    p.feed(re.sub(r"<(/?)title>", r"<\1x-title>", text))
    return p


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=80))
def test_board_text_never_becomes_markup(title):
    """Whatever the title, the page parses to the same elements and attributes as a plain one."""
    plain, hostile = _parsed(page(_tl("plain"))), _parsed(page(_tl(title)))
    assert hostile.tags == plain.tags
    assert hostile.attrs == plain.attrs and not any(a.startswith("on") for a in hostile.attrs)
    assert esc(title) in page(_tl(title))
