"""``dispatch``: the hand path (D15), one request through ``fleet.dispatch``'s one path, its
answer on stderr (and as JSON with ``--json``), its code as the exit code."""

from __future__ import annotations

import sys

from fleet.cmd.common import context, emit_json, fail, say
from fleet.core.exits import Exit
from fleet.core.safe_text import printable
from fleet.dispatch import dispatch


def dispatch_cmd(
    inv: str | None, issue: int, worker: str | None, dry_run: bool, as_json_: bool, ignore_ci: bool
) -> None:
    with context(inv, writes=not dry_run) as ctx:
        r = dispatch(ctx, issue, worker=worker, dry_run=dry_run, ignore_ci=ignore_ci)
        say(printable(r.line()), file=sys.stderr)
        if as_json_:
            emit_json(r.to_json())
        if r.code is not Exit.OK:
            raise fail(r.code, "")
