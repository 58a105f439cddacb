"""Closing references: which issues a pull request body closes, and how generated text avoids one.

The forge's rule (GitHub's documented behaviour, mirrored by the local forge): one of nine keywords
(close/closes/closed, fix/fixes/fixed, resolve/resolves/resolved, any case), optionally followed by a
colon, then whitespace, then the reference ``#N`` or ``owner/repo#N`` — the keyword sits
**immediately** before the reference (D16). "fixes #1 and #2" closes #1 only; "fixes the criterion from
VERIFY #6038" closes nothing. Quoting does not matter to the forge: a keyword inside a blockquote or a
code span is still live, which is why generated text must never carry one (D14).

PR bodies and comments are written by agents and strangers, so the number is bounded: a reference
is at most :data:`MAX_DIGITS` digits and at most :data:`MAX_ISSUE_NUMBER` (GitHub's issue ``number``
is a GraphQL ``Int``, a signed 32-bit value), and anything longer is text, not a reference. Without
the bound, ``fixes #`` and 5,000 digits raised ``ValueError`` in every later close-out (Python's
int-from-string limit) and ``#99999999999999999999`` overflowed SQLite's integer inside a merge.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# GraphQL's Int (GitHub's ``Issue.number``) is a signed 32-bit integer: no issue number is larger.
MAX_ISSUE_NUMBER = 2**31 - 1
MAX_DIGITS = len(str(MAX_ISSUE_NUMBER))

KEYWORDS = ("close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved")

_KEYWORD = "|".join(sorted(KEYWORDS, key=len, reverse=True))
# (?<![\w-]) : "prefixes #3" and "un-fix #3" are not the keyword "fixes"/"fix".
_CLOSING = re.compile(
    rf"(?<![\w/-])(?P<kw>{_KEYWORD}):?[ \t\r\n]+"
    r"(?:(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+))?#(?P<num>[0-9]{1,%d})\b" % MAX_DIGITS,
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ClosingRef:
    number: int
    repository: str  # "" = same repository as the PR

    def same_repo(self, repository: str) -> bool:
        return self.repository == "" or self.repository.lower() == repository.lower()


def closing_refs(text: str) -> tuple[ClosingRef, ...]:
    """Every closing reference in ``text``, in order, duplicates removed."""
    seen: dict[tuple[int, str], ClosingRef] = {}
    for m in _live(text):
        ref = ClosingRef(int(m.group("num")), (m.group("repo") or "").lower())
        seen.setdefault((ref.number, ref.repository), ref)
    return tuple(seen.values())


def _live(text: str) -> Iterator[re.Match[str]]:
    """The matches whose number can be an issue number (at most :data:`MAX_ISSUE_NUMBER`)."""
    for m in _CLOSING.finditer(text or ""):
        if int(m.group("num")) <= MAX_ISSUE_NUMBER:  # at most MAX_DIGITS digits: int() is safe
            yield m


def closes(text: str, number: int, repository: str = "") -> bool:
    """True when ``text`` holds a real closing reference to issue ``number`` of ``repository``."""
    return any(r.number == number and r.same_repo(repository) for r in closing_refs(text))


def has_live_keyword(text: str) -> bool:
    """True when ``text`` would close something if a PR quoted it (D14)."""
    # Every reference holds a '#', and most texts asked (select's reasons) hold none: no regex then.
    return bool(text) and "#" in text and next(_live(text), None) is not None


def defuse(text: str) -> str:
    """Make every closing reference in ``text`` inert while keeping it readable.

    A zero-width joiner between ``#`` and the number is invisible to a human and breaks the
    reference for the forge; the keyword itself stays, so the sentence still reads as written.
    """

    if text and "#" not in text:
        return text  # every reference holds a '#': nothing to make inert

    def _inert(m: re.Match[str]) -> str:
        whole = m.group(0)
        hash_at = whole.rindex("#")
        return whole[: hash_at + 1] + "\u2060" + whole[hash_at + 1 :]

    previous = None
    while previous != text:
        previous, text = text, _CLOSING.sub(_inert, text or "")
    return text
