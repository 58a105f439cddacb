"""Faults on the four-worker harness, part one: real containers, real SSH, real ``systemd --user``.

Each test provokes one fault the seeds measured on real boxes and checks the fleet's named answer:

- hostile issue text travels through the board, SSH and the unit byte for byte and is never
  interpreted by a shell (the brief, the agent's commit and the PR title are compared exactly);
- a target clone that is behind and dirty, and a runner clone that is behind and dirty, are synced
  before the run with the dirty work stashed (the stash is read back), and the PR merges cleanly
  (D10, D11, check 9);
- ``systemctl --user stop task-N`` posts a ``stopped`` marker that claims nothing (D12);
- a rate limit darkens that worker only, the others drain its lane, and after the stated reset a
  clean run there deletes the state file (D8);
- a worker whose link is down is refused with the unreachable code (30), the sweeper sends its lane's
  work elsewhere, and fleet-status says "unreachable" (check 8, D20).

The reaper and repairer faults (worker loss, SIGKILL, duplicate units) are in
``test_faults_reaper.py``. Each test leaves no live unit and no open issue behind it (a later
sweep would otherwise dispatch its leftovers).
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet.core.closing import has_live_keyword
from fleet.core.exits import Exit
from fleet.core.markers import Kind, history
from fleet.core.model import CapacitySource, parse_iso
from fleet.core.select import select
from fleet.dispatch import dispatch
from fleet.observe import snapshot
from fleet.roles.sweeper import tick
from fleet.runner.brief import render_brief
from fleet.testing.harness import HarnessInfo
from fleet.views.status import render
from tests.docker.faults_support import (
    FaultFleet,
    Leftovers,
    docker,
    fault_fleet,
    file_issue,
    kinds,
    leftovers,
    merged_prs,
    push_commit,
    read_remote,
    start_fields,
    wait_until,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture
def ff(harness_info: HarnessInfo, harness_deploy: Callable[[str], Path]) -> FaultFleet:
    return fault_fleet(harness_info, harness_deploy)


@pytest.fixture
def left(ff: FaultFleet) -> Iterator[Leftovers]:
    yield from leftovers(ff)


# -- hostile input -------------------------------------------------------------------------------

# Every shell construct that would run or redirect something if any layer interpolated the text
# into a command line, each aimed at a file whose existence afterwards would prove it ran.
_PWN = "fleet-pwned"


def _hostile(sentinel: int) -> tuple[str, str]:
    title = (
        f"Fix \"quoted\" & 'single' $(touch /tmp/{_PWN}-subst) `touch /tmp/{_PWN}-tick`; "
        f"touch /tmp/{_PWN}-semi | tee /tmp/{_PWN}-pipe > /tmp/{_PWN}-redir && "
        f'${{IFS}}$HOME \\ %s {{{{body}}}} {{0}} — say "fixes #{sentinel}" ✔'
    )
    body = (
        f"Line one with $(touch {_PWN}-rel) and `id > /tmp/{_PWN}-id`\n"
        f"  indented; rm -rf \"$HOME\" ; echo '{_PWN}' >> ~/{_PWN}-home\n"
        "\n"
        f"> He wrote \"Closes #{sentinel}\" and 'resolves #{sentinel}' in a quote.\n"
        "✔ fleet:success pr=#1\n"
        "fleet:release\n"
        "{{title}} {{issue}} {0} %(x)s \\n \\\\ \x7f tab\there\r\n"
        "last line without a newline: <>|&;!*?[]~#"
    )
    return title, body


def _no_pwned_files(ff: FaultFleet) -> list[str]:
    """Every file a metacharacter would have created, on every container and in the shared dir."""
    found: list[str] = []
    for c in ff.info.containers:
        out = docker("exec", c.container, "find", "/", "-xdev", "-name", f"{_PWN}*")
        found += [f"{c.name}:{line}" for line in out.splitlines() if line.strip()]
    found += [str(p) for p in ff.info.shared_dir.rglob(f"{_PWN}*")]
    return found


def test_hostile_titles_and_bodies_arrive_byte_for_byte_and_run_nothing(
    ff: FaultFleet, left: Leftovers
) -> None:
    sentinel = file_issue(ff, left, "Sentinel: must stay open", labels=["hold"])
    title, body = _hostile(sentinel)
    n = file_issue(ff, left, title, body)
    assert (ff.issue(n).title, ff.issue(n).body) == (title, body)  # the board keeps it as given

    with ff.context() as ctx:
        r = dispatch(ctx, n, worker="w3")
    assert r.launched, r.line()
    left.units.append(("w3", n))
    issue = ff.wait_last(n, Kind.SUCCESS)
    run_id = start_fields(issue)["run"]
    assert start_fields(issue)["worker"] == "w3"

    # The brief on the worker is exactly what the shipped template renders from the board's text:
    # one substitution pass, nothing expanded, nothing lost (title, quotes, newlines, \r, DEL).
    state = ff.state_dir("w3")
    run_dir = f"{state}/runs/{n}-{run_id}"
    got = read_remote(ff, "w3", f"{run_dir}/brief.md")
    want = render_brief(
        issue=n,
        title=title,
        body=body,
        mentions=(),
        results_file=f"{run_dir}/results.json",
        worktree=f"{state}/worktrees/{n}-{run_id}",
    ).text.encode("utf-8")
    assert got == want
    assert f"Title: {title}\n\n{body}\n\n## Mentions".encode() in got

    # The agent wrote the title into its commit, and the PR carries it as its title, unchanged.
    note = subprocess.run(
        ["git", "--git-dir", str(ff.root / "origin.git"), "show", f"main:notes/issue-{n}.md"],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    assert note == f"- run {run_id}: {title}\n".encode()
    prs = ff.board.pull_requests_closing(n)
    assert [p.title for p in prs] == [title] and prs[0].merged

    # Nothing ran: no file any construct aims at exists anywhere.
    assert _no_pwned_files(ff) == []
    # A quoted closing keyword closed nothing, and no marker the fleet wrote carries a live one.
    assert ff.issue(sentinel).is_open
    assert not ff.issue(n).is_open
    fleet_comments = [c.body for c in ff.issue(n).comments if c.author == "fleet"]
    assert fleet_comments and not any(has_live_keyword(b) for b in fleet_comments)


# -- stale and dirty clones ----------------------------------------------------------------------


def test_a_stale_dirty_clone_is_synced_with_its_work_stashed_and_the_pr_merges(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w2"
    target = ff.config(w).clone
    runner = ff.config(w).runner_clone
    # A first run makes sure both clones exist on this master.
    first = file_issue(ff, left, "First run on w2: make the clones")
    with ff.context() as ctx:
        assert dispatch(ctx, first, worker=w).launched
    left.units.append((w, first))
    ff.wait_last(first, Kind.SUCCESS)

    n = file_issue(ff, left, "Run on a stale, dirty clone")
    # Behind: both remotes move on after the clones last fetched.
    scratch = ff.root / "scratch"
    moved = push_commit(
        ff.root / "origin.git", scratch / "origin-mover", "README.md", "# moved on\n", "move main"
    )
    runner_head = push_commit(
        ff.runner_remote, scratch / "fleet-mover", "docs-moved.txt", "moved\n", "move fleet"
    )
    # Dirty: a tracked edit and an untracked file in each clone — work a human left there. The
    # untracked note has the very path the run's agent writes: had it leaked into the run's tree
    # (or been discarded), the PR or the stash would show it.
    dirty_note = "uncommitted local edit: must survive\n"
    ff.must(
        w,
        f"cd {target} && echo 'local README edit' >> README.md && mkdir -p notes && "
        f"printf %s {shlex.quote(dirty_note)} > notes/issue-{n}.md && "
        f"cd {runner} && echo 'local runner edit' >> fleet/py.typed && echo scratch > scratch.txt",
    )

    err = io.StringIO()
    with ff.context() as ctx:
        ctx.stderr = err
        r = dispatch(ctx, n, worker=w)
    assert r.launched, r.line()
    left.units.append((w, n))
    assert f"dirty clone {target} stashed" in err.getvalue()
    issue = ff.wait_last(n, Kind.SUCCESS)
    run_id = start_fields(issue)["run"]
    assert merged_prs(ff, n) and not issue.is_open  # the PR merged: no conflict

    # origin main has the host's move AND the run's note, not the dirty copy of it.
    def show(path: str) -> str:
        return subprocess.run(
            ["git", "--git-dir", str(ff.root / "origin.git"), "show", f"main:{path}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout

    assert show("README.md") == "# moved on\n"
    assert show(f"notes/issue-{n}.md") == f"- run {run_id}: {issue.title}\n"

    # The target clone: synced to the moved main, the dirty work in a stash naming the run.
    assert ff.must(w, f"git -C {target} rev-parse HEAD").strip() == moved
    stashes = ff.must(w, f"git -C {target} stash list")
    assert f"fleet: stashed before run {r.run_id} of #{n}" in stashes
    assert "local README edit" in ff.must(w, f"git -C {target} stash show -p stash@{{0}}")
    kept = ff.must(w, f"git -C {target} show 'stash@{{0}}^3:notes/issue-{n}.md'")
    assert kept == dirty_note
    # The runner clone (D11): synced before the run to the moved fleet, its edits stashed too.
    assert ff.must(w, f"git -C {runner} rev-parse HEAD").strip() == runner_head
    stashes = ff.must(w, f"git -C {runner} stash list")
    assert f"fleet: stashed before runner sync for run {run_id}" in stashes
    assert "local runner edit" in ff.must(w, f"git -C {runner} stash show -p stash@{{0}}")
    assert ff.must(w, f"git -C {runner} show 'stash@{{0}}^3:scratch.txt'") == "scratch\n"


# -- signals -------------------------------------------------------------------------------------


def test_systemctl_stop_posts_a_stopped_marker_that_claims_nothing(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w3"
    n = file_issue(ff, left, "Fault: hang, then a hand stop", labels=["demo:hang"])
    with ff.context() as ctx:
        r = dispatch(ctx, n, worker=w)
    assert r.launched, r.line()
    left.units.append((w, n))
    ff.wait_marker(n, Kind.START)
    assert ff.live_units(w, n), "the hanging run's unit should be live"

    ff.must(w, f"systemctl --user stop task-{n}", timeout=120)  # as the master, by hand

    issue = ff.wait_last(n, Kind.STOPPED)
    assert kinds(issue) == [Kind.START, Kind.STOPPED]
    stopped = history(issue, "fleet").last_of(Kind.STOPPED)
    assert stopped is not None and stopped.get("signal") == "SIGTERM"
    assert issue.is_open and ff.board.pull_requests_closing(n) == ()
    wait_until(f"task-{n} gone on {w}", lambda: not ff.live_units(w, n), 60)
    # Claims nothing: not a success, not a latch — the scheduler offers the issue again.
    with ff.context() as ctx:
        plan = select(snapshot(ctx))
    assert n in [d.issue for d in plan.dispatch], plan.reason_for(n)


# -- capacity ------------------------------------------------------------------------------------


def test_a_rate_limit_darkens_one_worker_the_rest_drain_and_a_clean_run_heals_it(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w2"
    cap_file = f"{ff.state_dir(w)}/capacity.json"
    ff.must(w, f"rm -f {cap_file}")
    try:
        _rate_limit_scenario(ff, left, w, cap_file)
    finally:
        ff.sh(w, f"rm -f {cap_file}")  # a failed test must not leave w2 dark for the next one


def _rate_limit_scenario(ff: FaultFleet, left: Leftovers, w: str, cap_file: str) -> None:
    # demo:once: the first run hits the limit, a later run does the work (D8's shape).
    limited = file_issue(
        ff, left, "Fault: rate limit on w2", labels=["demo:rate-limit", "demo:once"], lane=w
    )
    with ff.context() as ctx:
        r = dispatch(ctx, limited, worker=w)
    assert r.launched, r.line()
    left.units.append((w, limited))
    capacity = history(ff.wait_last(limited, Kind.CAPACITY), "fleet").last_of(Kind.CAPACITY)
    assert capacity is not None and capacity.get("source") == "rate_limit"

    # The state file on that worker: source, the provider's stated reset (3pm Lisbon, resolved
    # forward, never in the past), the evidence and the issue.
    data = json.loads(read_remote(ff, w, cap_file))
    assert data["source"] == CapacitySource.RATE_LIMIT.value
    reset = parse_iso(data["reset_at"])
    assert reset is not None and reset > datetime.now(UTC)
    assert data["issue"] == limited and "hit your limit" in data["evidence"]
    for other in ("w1", "w3", "w4-alpha", "w4-beta"):
        assert ff.sh(other, f"test -e {ff.state_dir(other)}/capacity.json")[0] != 0

    with ff.context() as ctx:
        snap = snapshot(ctx)
        dark = {v.name for v in snap.workers if v.dark}
        assert dark == {w}
        shown = render(snap, select(snap), None, 300)
        assert any(ln.split()[0] == w and " dark (source rate_limit" in ln
                   for ln in shown.splitlines() if ln.startswith("  w"))  # fmt: skip
        refused = dispatch(ctx, file_issue(ff, left, "Not onto a dark worker"), worker=w)
    assert (refused.outcome, refused.check, refused.code) == ("refused", 4, Exit.DARK_RATE_LIMIT)
    ff.board.close(refused.issue)

    # The others keep draining — the dark worker's own lane included, and the limited issue, whose
    # capacity death spent no attempt, finishes elsewhere.
    lane_work = [file_issue(ff, left, f"Lane w2 work {i}", lane=w) for i in range(2)]
    with ff.context() as ctx:
        report = tick(ctx, apply=True)
    launched = {x.issue: x.worker for x in report.results if x.launched}
    assert set(launched) == {limited, *lane_work}, [x.line() for x in report.results]
    assert w not in launched.values()
    for n in launched:
        left.units.append((launched[n], n))
        done = ff.wait_last(n, Kind.SUCCESS)
        assert start_fields(done)["worker"] != w
    assert kinds(ff.issue(limited)) == [Kind.START, Kind.CAPACITY, Kind.START, Kind.SUCCESS]
    assert ff.sh(w, f"test -e {cap_file}")[0] == 0  # still dark: nothing ran there

    # After the stated reset the clock clears the rate limit (D8 property 3), and the worker's
    # next clean run deletes the file (property 1). The dispatcher's clock is moved past the
    # reset; the worker's own clock is untouched.
    later = reset + timedelta(minutes=1)
    skew = later - datetime.now(UTC)
    heal = file_issue(ff, left, "A clean run on w2 after the reset")
    with ff.context(clock=lambda: datetime.now(UTC) + skew) as ctx:
        r = dispatch(ctx, heal, worker=w)
    assert r.launched, r.line()
    left.units.append((w, heal))
    ff.wait_last(heal, Kind.SUCCESS)
    wait_until(f"{cap_file} deleted", lambda: ff.sh(w, f"test -e {cap_file}")[0] != 0, 60)
    with ff.context() as ctx:
        assert not any(v.dark for v in snapshot(ctx).workers)


# -- partition -----------------------------------------------------------------------------------


def test_a_partitioned_worker_is_refused_unreachable_and_its_lane_drains_elsewhere(
    ff: FaultFleet, left: Leftovers
) -> None:
    w = "w3"
    container = ff.container(w)
    try:
        docker("exec", container, "ip", "link", "set", "eth0", "down")
        n = file_issue(ff, left, "Pinned to the partitioned worker")
        with ff.context() as ctx:
            r = dispatch(ctx, n, worker=w)
        assert (r.outcome, r.check, r.code) == ("refused", 8, Exit.UNREACHABLE), r.line()
        assert ff.issue(n).comments == ()  # a refusal leaves no mark (D6)
        ff.board.close(n)

        lane_work = [file_issue(ff, left, f"Lane w3 work {i}", lane=w) for i in range(2)]
        with ff.context() as ctx:
            report = tick(ctx, apply=True)
        launched = {x.issue: x.worker for x in report.results if x.launched}
        assert set(launched) == set(lane_work), [x.line() for x in report.results]
        assert w not in launched.values()
        for i in lane_work:
            left.units.append((launched[i], i))
            assert start_fields(ff.wait_last(i, Kind.SUCCESS))["worker"] == launched[i]

        with ff.context() as ctx:
            snap = snapshot(ctx)
        line = next(ln for ln in render(snap, select(snap), None, 300).splitlines()
                    if ln.split()[:1] == [w])  # fmt: skip
        assert " unreachable (unreachable: " in line
    finally:
        docker("exec", container, "ip", "link", "set", "eth0", "up")
        ff.refresh()
    assert ff.must(w, "echo back").strip() == "back"
