"""``invoke doctor``: prove a setup before the first run (#11). Thin I/O around ``fleet.doctor``."""

from __future__ import annotations

from fleet.cmd.common import emit_json, fail
from fleet.core.exits import Exit
from fleet.doctor import checks
from fleet.doctor.model import all_ok, as_json, render
from fleet.inventory import default_path


def doctor(inv: str | None, as_json_: bool, probe: bool) -> None:
    """Exit 0 when every check passed; 3 (INVENTORY) when the inventory itself does not load, as
    every command does; else 56 (DOCTOR_FAILED), naming each failed check."""
    findings = checks.run(inv, default_path(), checks.Options(probe=probe))
    if len(findings) == 1 and findings[0].check == "inventory" and not findings[0].ok:
        if not as_json_:
            print(render(findings))
        raise fail(Exit.INVENTORY, findings[0].detail)  # --json: the common error object
    code = Exit.OK if all_ok(findings) else Exit.DOCTOR_FAILED
    if as_json_:
        emit_json({"command": "doctor", "outcome": "ok" if code is Exit.OK else "failed",
                   "code": int(code), "code_name": code.name, **as_json(findings)})  # fmt: skip
    else:
        print(render(findings))
    if code is not Exit.OK:
        bad = [f.check for f in findings if not f.ok]
        raise fail(code, f"doctor: failed: {', '.join(bad)}")
