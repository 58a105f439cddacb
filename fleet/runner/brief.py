"""The agent's brief: a versioned artifact carrying accumulated corrections (D17), and the results
file through which the agent tells the fleet anything a machine must act on.

``brief.md`` ships inside the package; its first line is ``brief-version: N`` so every run's trace
can name the doctrine it ran under (D11: frozen doctrine is invisible unless it is versioned).

Rendering substitutes six placeholders in ONE pass with a regular expression: the issue body and the
mentions are text anyone with write access to the tracker controls, so a body containing
``{{title}}`` or ``{0}`` must arrive verbatim — never expanded by ``str.format`` and never by a
second ``str.replace`` pass over text an earlier pass inserted. Mentions are injected here; the
runner marks them read only *after* rendering, so delivery is at-least-once (D19).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.core.model import Mention, iso
from fleet.runner.statefile import read_state_file

BRIEF_FILE = "brief.md"
PLACEHOLDERS = ("issue", "title", "body", "mentions", "results_file", "worktree")

_VERSION_LINE = re.compile(r"\Abrief-version:[ \t]*(?P<version>[^\s]+)[ \t]*\r?\n")
_PLACEHOLDER = re.compile(r"\{\{(" + "|".join(PLACEHOLDERS) + r")\}\}")


class BriefError(Exception):
    """The shipped brief is malformed (no version line, or a placeholder missing)."""


@dataclass(frozen=True)
class RenderedBrief:
    version: str
    text: str


def brief_template() -> str:
    """The shipped template, read beside this module: it is package data (pyproject.toml), so the
    runner clone and every install keep it there. Not through importlib.resources, whose import a
    run on a worker would pay for this one read."""
    return Path(__file__).with_name(BRIEF_FILE).read_text(encoding="utf-8")


def _version_of(template: str) -> str:
    m = _VERSION_LINE.match(template)
    if m is None:
        raise BriefError(f"{BRIEF_FILE} does not start with a 'brief-version: N' line")
    return m["version"]


def brief_version() -> str:
    return _version_of(brief_template())


def render_mentions(mentions: Sequence[Mention]) -> str:
    """Mentions as a list, oldest first; '(none)' keeps the section honest when there are none."""
    if not mentions:
        return "(none)"
    lines = []
    for m in sorted(mentions, key=lambda m: (m.created_at, m.id)):
        body = m.body.strip().replace("\n", "\n  ")
        lines.append(f"- @{m.author} at {iso(m.created_at)} (comment {m.id}):\n  {body}")
    return "\n".join(lines)


def render_template(template: str, values: dict[str, str]) -> str:
    """Substitute ``{{name}}`` for every name in ``values`` in one pass; inserted text is final."""
    return _PLACEHOLDER.sub(lambda m: values.get(m[1], m[0]), template)


def render_brief(
    *,
    issue: int,
    title: str,
    body: str,
    mentions: Sequence[Mention],
    results_file: str,
    worktree: str,
    template: str | None = None,
) -> RenderedBrief:
    """The brief for one run. ``template`` defaults to the shipped ``brief.md``."""
    template = brief_template() if template is None else template
    version = _version_of(template)
    values = {
        "issue": str(issue),
        "title": title,
        "body": body if body.strip() else "(no description)",
        "mentions": render_mentions(mentions),
        "results_file": results_file,
        "worktree": worktree,
    }
    return RenderedBrief(version, render_template(template, values))


# -- the results file (D17: structured JSON for anything a machine must act on) ----------------


def read_results(path: Path) -> tuple[dict | None, str | None]:
    """(object, None) when the agent wrote one; (None, None) when it wrote nothing; (None, warning)
    when the file holds something that is not one JSON object — reported, never trusted (D5)."""
    text, unreadable = read_state_file(path)
    if unreadable is not None:
        return None, f"results file {path} unreadable: {unreadable}"
    if text is None or not text.strip():
        return None, None
    try:
        data = json.loads(text)
    except ValueError as err:
        return None, f"results file {path} is not JSON: {err}"
    if not isinstance(data, dict):
        return None, f"results file {path} holds a JSON {type(data).__name__}, not an object"
    return data, None


def declared_blocker(results: dict | None) -> tuple[dict | None, str | None]:
    """The ``blocker`` the agent declared, checked for shape: ``{"reason": str, "needs": [int]}``.

    A wrong shape is a warning, not a blocker: a guard trusts JSON only after checking its type (D5).
    """
    if results is None or "blocker" not in results:
        return None, None
    blocker = results["blocker"]
    if not isinstance(blocker, dict) or not isinstance(blocker.get("reason"), str):
        return None, "results file: blocker must be an object with a string 'reason'"
    needs = blocker.get("needs", [])
    if not isinstance(needs, list) or any(
        isinstance(n, bool) or not isinstance(n, int) for n in needs
    ):
        return None, "results file: blocker 'needs' must be a list of issue numbers"
    return {"reason": blocker["reason"], "needs": list(needs)}, None


def declared_left_open(results: dict | None) -> tuple[str | None, str | None]:
    """The reason the agent gave for leaving the issue open after its merged PR (D6's
    "finished but deliberately left open"), checked for shape: ``{"reason": str}``. A wrong shape
    is a warning, never a left-open (D5)."""
    if results is None or "left_open" not in results:
        return None, None
    left = results["left_open"]
    if not isinstance(left, dict) or not isinstance(left.get("reason"), str):
        return None, "results file: left_open must be an object with a string 'reason'"
    reason = " ".join(left["reason"].split())
    if not reason:
        return None, "results file: left_open needs a non-empty 'reason'"
    return reason, None


def clear_results(path: Path) -> None:
    """Remove the results file before a run, so a prior run's state cannot leak into it (D17)."""
    Path(path).unlink(missing_ok=True)
