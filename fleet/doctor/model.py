"""Doctor findings and how they are shown. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    """One check's verdict. ``reason`` is a short closed name (D20: two failures that look alike
    get two names); ``fix`` says what the operator does, and is empty on a pass."""

    check: str  # "inventory", "board: identity", "worker w1: ssh"
    ok: bool
    reason: str  # "ok", "unreachable", "login-differs", "agent-not-on-path", ...
    detail: str
    fix: str = ""


def passed(check: str, detail: str) -> Finding:
    return Finding(check, True, "ok", detail)


def failed(check: str, reason: str, detail: str, fix: str) -> Finding:
    return Finding(check, False, reason, detail, fix)


def all_ok(findings: Sequence[Finding]) -> bool:
    return all(f.ok for f in findings)


def render(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        if f.ok:
            lines.append(f"PASS {f.check}: {f.detail}")
        else:
            lines.append(f"FAIL {f.check}: {f.reason}: {f.detail}")
            lines.append(f"     fix: {f.fix}")
    bad = sum(1 for f in findings if not f.ok)
    lines.append(
        f"doctor: {len(findings)} checks, all passed"
        if not bad
        else f"doctor: {bad} of {len(findings)} checks failed"
    )
    return "\n".join(lines)


def as_json(findings: Sequence[Finding]) -> dict[str, Any]:
    return {"ok": all_ok(findings), "checks": [asdict(f) for f in findings]}
