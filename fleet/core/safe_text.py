"""Board text made safe for the operator's terminal: one pure function, used wherever it is printed.

Titles, bodies, comments, labels and reasons are written by whoever can file an issue, and by
agents. Printed raw, an escape sequence in a title rewrites ``fleet-status`` lines, moves the
cursor or sets the terminal's title, and a bidi override (U+202E) makes a line read backwards
from what it says. :func:`printable` shows every such character as a visible escape instead: C0
and C1 controls and DEL as ``\\xNN``, the bidi controls and the Unicode line/paragraph separators
as ``\\uNNNN``. Everything else — any script, any emoji, the markers' glyphs — is left as written.
"""

from __future__ import annotations

# Unicode's bidirectional formatting characters (UAX #9): embeddings, overrides, isolates, marks.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Characters some terminals and editors break a line on, which the text did not say.
SEPARATORS = frozenset("\u2028\u2029\x85")


def _unsafe(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o < 0xA0 or ch in BIDI or ch in SEPARATORS


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` with every control and bidi character escaped visibly.

    ``lines=True`` keeps ``\\n`` (a multi-line block the caller prints as lines) and tabs; otherwise
    the result is one line.
    """
    s = str(text)
    if not any(_unsafe(ch) for ch in s):
        return s
    out = []
    for ch in s:
        if not _unsafe(ch) or (lines and ch in "\n\t"):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)
