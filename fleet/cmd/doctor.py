"""``invoke doctor``: prove a setup before the first run (#11). Thin I/O around ``fleet.doctor``."""

from __future__ import annotations

from fleet.cmd.common import emit_json, fail
from fleet.doctor import checks
from fleet.doctor.model import all_ok, as_json, render
from fleet.exits import Exit
from fleet.inventory import default_path


def doctor(inv: str | None, as_json_: bool, probe: bool) -> None:
    findings = checks.run(inv, default_path(), checks.Options(probe=probe))
    if as_json_:
        emit_json(as_json(findings))
    else:
        print(render(findings))
    if not all_ok(findings):
        bad = [f.check for f in findings if not f.ok]
        raise fail(Exit.DOCTOR_FAILED, f"doctor: failed: {', '.join(bad)}")
