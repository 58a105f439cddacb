"""The GitHub board over the replayer: pagination, rate limits, outages, attribution facts, writes.

The replayer is the only fake (tests/github/replay.py); every document it is sent is validated
against GitHub's schema and every answer it gives is shape-checked, inside each test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.board.base import BoardError, BoardUnreadable, BoardWriteError
from fleet.board.github import GitHubBoard
from fleet.board.github.forge import ci_state
from fleet.board.github.http import (
    ReadGraphQLErrors,
    ReadRateLimited,
    WriteRateLimited,
    graphql_url,
)
from fleet.board.github.parse import pull_request
from fleet.core.markers import Kind, parse
from fleet.core.model import (
    CIState,
    Comment,
    EventKind,
    IssueState,
    PRState,
    PullRequest,
    StateReason,
)
from fleet.inventory import BoardConfig, GitHubConfig
from fleet.runner.closeout import decide_close_out
from tests.github.backend import github_board
from tests.github.replay import TOKEN, Replayer

RUN_STARTED_AT = datetime(2024, 4, 1, 10, 15, tzinfo=UTC)  # the run the recorded PRs are judged by


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def state() -> Replayer:
    return Replayer()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def board(state: Replayer, sleeps: Sleeps) -> GitHubBoard:
    return github_board(state, sleep=sleeps, page_size=2)


def graphql_calls(state: Replayer) -> int:
    return sum(1 for m, p, _ in state.requests if (m, p) == ("POST", "/graphql"))


# -- the one read per cycle (D1) ----------------------------------------------------------------


def test_read_pages_through_the_board_and_sums_the_cost(
    state: Replayer, board: GitHubBoard
) -> None:
    numbers = [board.create_issue(f"issue {k}") for k in range(5)]
    board.close(numbers[2])
    board.create_issue("HALT FLEET", status=None)  # the halt issue rides the same page
    before = len(state.requests)
    page = board.read()
    assert [i.number for i in page.issues] == [*numbers[:2], *numbers[3:], 6]
    assert graphql_calls_since(state, before) == 3  # 6 items at 2 a page, no edges to fetch
    assert page.cost_unit == "points" and page.cost == 3  # 1 point a page, from rateLimit.cost
    assert board.last_rate_limit is not None and board.last_rate_limit.cost == 1
    halt = next(i for i in page.issues if i.title == "HALT FLEET")
    assert halt.status is None


def graphql_calls_since(state: Replayer, index: int) -> int:
    return sum(1 for m, p, _ in state.requests[index:] if (m, p) == ("POST", "/graphql"))


def test_recorded_pages_reopen_after_a_success_marker_and_candidate_edges(sleeps: Sleeps) -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    for name in ("graphql_board_page", "graphql_board_page_last", "graphql_edges"):
        state.enqueue("POST", "/graphql", name)
    page = github_board(state, sleep=sleeps, page_size=2).read()
    reopened, parent = page.issues  # the draft issue is not the queue
    assert (reopened.number, reopened.lane, reopened.labels) == (7, "gpu", ("fleet-fixture",))
    marker = reopened.comments[0]  # the fleet's; humans with every association follow it
    assert [c.association for c in reopened.comments] == [
        "MEMBER", "NONE", "FIRST_TIME_CONTRIBUTOR", "CONTRIBUTOR", "COLLABORATOR", "OWNER"
    ]  # fmt: skip
    assert (reopened.author, reopened.author_association) == ("octocat", "OWNER")
    kinds = [e.kind for e in reopened.events]
    assert kinds == [EventKind.CLOSED, EventKind.REOPENED, EventKind.LABELED]
    assert reopened.is_open and reopened.events[1].at > marker.created_at  # reopen outranks it
    assert reopened.events[0].detail == StateReason.COMPLETED.value
    assert (parent.status, parent.lane) == ("Todo", "cpu")
    assert parent.open_sub_issues == (9,)
    assert [(b.number, b.repository) for b in parent.blocked_by] == [(3, "octocat/other")]
    assert page.cost == 3


def test_lists_behind_summaries_are_fetched_for_todo_candidates_only(
    state: Replayer, board: GitHubBoard
) -> None:
    held = board.create_issue("in progress, blocked", status="In progress")
    todo = board.create_issue("todo, blocked")
    blocker = board.create_issue("blocker")
    board.add_blocker(held, blocker)
    board.add_blocker(todo, blocker)
    before = len(state.answers)
    seen = {i.number: i for i in board.read().issues}
    edges = [doc for doc, _ in state.answers[before:] if "query Edges" in doc]
    assert len(edges) == 1
    assert seen[todo].open_blockers == (blocker,)
    assert seen[held].blocked_by == ()  # predicate 1 already stops it; nothing was paid for it
    fresh = board.issue(held)
    assert fresh is not None and fresh.open_blockers == (blocker,)  # a single read lists all


def test_an_unreadable_board_raises_board_unreadable(state: Replayer, sleeps: Sleeps) -> None:
    with pytest.raises(BoardUnreadable, match="no project 9"):
        GitHubBoard(owner=state.owner, repo=state.repo, project_number=9, identity="fleet-bot",
                    token=TOKEN, api_url="https://api.github.test", client=state.client(),
                    sleep=sleeps).read()  # fmt: skip
    state.enqueue("POST", "/graphql", "graphql_closing_prs_errors")
    with pytest.raises(BoardUnreadable):
        github_board(state, sleep=sleeps).read()


# -- rate limits and outages ----------------------------------------------------------------------


def test_secondary_rate_limit_waits_retry_after_then_succeeds(
    state: Replayer, board: GitHubBoard, sleeps: Sleeps
) -> None:
    n = board.create_issue("busy")
    state.enqueue("POST", r".*/comments", "rest_secondary_rate_limit")
    state.enqueue("POST", "/graphql", "rest_secondary_rate_limit")
    assert board.comment(n, "after the limit").body == "after the limit"
    assert [i.number for i in board.read().issues] == [n]
    assert sleeps == [60.0, 60.0]


def test_rate_limits_past_the_bound_fail_reads_closed_and_writes_loudly(
    state: Replayer, board: GitHubBoard, sleeps: Sleeps
) -> None:
    n = board.create_issue("busy")
    state.enqueue("POST", "/graphql", "rest_secondary_rate_limit", times=4)
    with pytest.raises(ReadRateLimited, match="secondary rate limit") as read_err:
        board.read()
    assert isinstance(read_err.value, BoardUnreadable)
    assert sum(sleeps) <= 180.0  # MAX_TOTAL_WAIT_S: a cycle never overruns the timer period
    state.enqueue("POST", r".*/comments", "rest_secondary_rate_limit", times=4)
    with pytest.raises(WriteRateLimited) as write_err:
        board.comment(n, "never posted")
    assert isinstance(write_err.value, BoardWriteError)
    assert TOKEN not in str(read_err.value) + str(write_err.value)


def test_primary_limits_wait_for_the_reset_in_both_envelopes(
    state: Replayer, board: GitHubBoard, sleeps: Sleeps
) -> None:
    n = board.create_issue("limited")
    state.enqueue("PATCH", rf".*/issues/{n}", "rest_primary_rate_limit")
    state.enqueue("POST", "/graphql", "graphql_rate_limited")  # HTTP 200 with RATE_LIMITED
    board.close(n, StateReason.NOT_PLANNED)
    assert board.issue(n) is not None
    assert sleeps == [1.0, 1.0]  # the recorded reset is in the past: wait the minimum


def test_an_outage_retries_reads_but_never_repeats_a_post(
    state: Replayer, board: GitHubBoard, sleeps: Sleeps
) -> None:
    n = board.create_issue("outage")
    state.enqueue("POST", r".*/comments", "rest_server_error")
    posts = len(state.requests)
    with pytest.raises(BoardWriteError, match="502"):
        board.comment(n, "maybe posted")
    assert len(state.requests) == posts + 1  # a retry could double a start marker (predicate 7)
    state.enqueue("POST", "/graphql", "rest_server_error")
    assert board.issue(n) is not None and sleeps == [2.0]


def test_a_404_body_makes_ci_unknown_with_a_warning(
    state: Replayer, board: GitHubBoard, capsys: pytest.CaptureFixture[str]
) -> None:
    state.enqueue("GET", rf"/repos/{state.full_name}/commits/main/check-runs", "rest_not_found")
    assert board.ci_status() is CIState.UNKNOWN
    assert "unreadable" in capsys.readouterr().err
    assert board.ci_status() is CIState.GREEN
    state.ci = ("success", ["success", "failure"])
    assert board.ci_status() is CIState.RED
    state.ci = ("none", ["pending"])
    assert board.ci_status() is CIState.UNKNOWN


def test_missing_issue_is_none_and_a_write_to_it_names_it(board: GitHubBoard) -> None:
    assert board.issue(987_654) is None
    with pytest.raises(BoardWriteError, match="987654/comments: HTTP 404: Not Found"):
        board.comment(987_654, "hello")


# -- attribution (D2, D16) ------------------------------------------------------------------------


def test_closing_prs_report_facts_the_runner_judges(capsys: pytest.CaptureFixture[str]) -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    state.enqueue("POST", "/graphql", "graphql_closing_prs")
    prs = {p.number: p for p in github_board(state).pull_requests_closing(7)}
    assert prs[20].merged and prs[20].created_at < RUN_STARTED_AT  # merged, but an older run's
    assert prs[31].merged and prs[31].repository == "octocat/other-repo"  # cannot close #7
    assert "tombstone risk" in capsys.readouterr().err
    assert (prs[32].state, prs[32].merged) == (PRState.CLOSED, False)
    assert prs[33].state is PRState.OPEN
    # The runner's own close-out (D15) judges the recorded facts: an older run's merge is not this
    # run's success, and a merge in another repository cannot close the issue — a tombstone risk.
    assert _close_out(prs[20]) is not Kind.SUCCESS
    assert _close_out(prs[31]) is Kind.CROSS_REPO
    assert _close_out(*prs.values()) is Kind.PR_OPEN  # this run's own open #33 outranks: unfinished


def _close_out(*prs: PullRequest, started: datetime = RUN_STARTED_AT) -> Kind:
    envelope = '{"type": "result", "subtype": "success", "is_error": false, "result": "done"}'
    out = decide_close_out(output=envelope, prs=prs, forge_error=None,
                           run_started_at=started, exit_code=0, signal_name=None,
                           timed_out=False, workspace_failure=None, retries_so_far=0,
                           backoffs_s=(30,), results=None,
                           now=started + timedelta(minutes=30))  # fmt: skip
    marker = parse(Comment(1, "fleet", out.marker, started))
    assert marker is not None, out.marker
    return marker.kind


def test_graphql_errors_never_read_as_no_pull_request() -> None:
    state = Replayer(owner="octocat", repo="Hello-World")
    state.enqueue("POST", "/graphql", "graphql_closing_prs_errors")
    with pytest.raises(ReadGraphQLErrors, match="not accessible"):
        github_board(state).pull_requests_closing(7)


@given(
    state=st.sampled_from(["OPEN", "CLOSED", "MERGED"]),
    merged=st.sampled_from([True, False, None, "true"]),
    merged_at=st.sampled_from([None, "2024-04-01T10:00:00Z", 0]),
)
def test_merged_only_when_merged_and_merged_at_say_so(
    state: str, merged: Any, merged_at: Any
) -> None:
    node = {"number": 1, "title": "t", "body": "", "headRefName": "b", "state": state,
            "merged": merged, "createdAt": "2024-04-01T09:00:00Z", "mergedAt": merged_at,
            "author": None, "repository": {"nameWithOwner": "o/r"}}  # fmt: skip
    pr = pull_request(node, "o/r")
    assert pr.merged == (merged is True and isinstance(merged_at, str))
    assert (pr.state is PRState.MERGED) == pr.merged


@given(st.lists(st.sampled_from(["success", "failure", "neutral", "pending", "timed_out"])),
       st.sampled_from(["success", "failure", "error", "pending"]), st.integers(0, 2))  # fmt: skip
def test_ci_is_never_green_with_a_failure(checks: list[str], combined: str, total: int) -> None:
    runs = [{"status": "in_progress" if c == "pending" else "completed",
             "conclusion": None if c == "pending" else c} for c in checks]  # fmt: skip
    got = ci_state({"state": combined, "total_count": total}, runs)
    failed = {"failure", "timed_out"} & set(checks) or (total and combined in ("failure", "error"))
    assert (got is CIState.RED) == bool(failed)
    if not checks and not total:
        assert got is CIState.UNKNOWN  # no CI at all is never green and never red


# -- writes ----------------------------------------------------------------------------------------


def test_create_files_labels_in_the_post_and_puts_the_issue_on_the_board(
    state: Replayer, board: GitHubBoard
) -> None:
    n = board.create_issue("probe", labels=["fleet-fixture"], lane="gpu")
    _, _, body = next(r for r in state.requests if r[0] == "POST" and r[1].endswith("/issues"))
    assert body["labels"] == ["fleet-fixture"]  # predicate 9: the label from birth
    assert state.issues[n].fields == {"Status": "Todo", "Lane": "gpu"}
    with pytest.raises(BoardWriteError, match=r"no option 'Doing'.*'In progress'"):
        board.set_status(n, "Doing")
    board.set_lane(n, None)
    assert "Lane" not in state.issues[n].fields


def test_single_select_lane_needs_a_known_option(sleeps: Sleeps) -> None:
    state = Replayer(lane_kind="SINGLE_SELECT")
    board = github_board(state, sleep=sleeps)
    n = board.create_issue("placed", lane="cpu")
    assert board.issue(n).lane == "cpu"  # type: ignore[union-attr]
    with pytest.raises(BoardWriteError, match="has no option 'tpu'"):
        board.set_lane(n, "tpu")


def test_comment_before_close_and_read_back_even_when_closed(
    state: Replayer, board: GitHubBoard
) -> None:
    n = board.create_issue("merged elsewhere")
    board.close(n)
    stored = board.comment(n, "close-out after the close")  # D12
    assert (stored.id, stored.author) == (state.issues[n].comments[-1]["id"], "fleet-bot")
    assert ("GET", f"/repos/{state.full_name}/issues/comments/{stored.id}", None) in state.requests
    state.enqueue("GET", r".*/issues/comments/\d+", "rest_not_found")
    with pytest.raises(BoardWriteError, match="HTTP 404"):
        board.comment(n, "posted but not readable")


def test_sub_issues_and_dependencies_send_database_ids(state: Replayer, board: GitHubBoard) -> None:
    parent, child = board.create_issue("parent"), board.create_issue("child")
    board.set_parent(child, parent)
    board.add_blocker(parent, child)
    bodies = [
        b for m, p, b in state.requests if m == "POST" and ("sub_issues" in p or "blocked" in p)
    ]
    assert bodies == [{"sub_issue_id": state.issues[child].db_id, "replace_parent": True},
                      {"issue_id": state.issues[child].db_id}]  # fmt: skip
    assert state.issues[child].db_id != child
    board.set_parent(child, None)
    board.set_parent(child, None)  # no parent: nothing to remove
    got = board.issue(child)
    assert got is not None and got.parent is None and got.state is IssueState.OPEN


def test_writing_as_someone_else_is_refused(board: GitHubBoard) -> None:
    n = board.create_issue("mine")
    with pytest.raises(BoardWriteError, match="cannot write as 'human'"):
        board.comment(n, "words", author="human")


# -- mentions (D19) and the token -----------------------------------------------------------------


def test_mentions_of_this_issue_are_read_then_marked_read(
    state: Replayer, board: GitHubBoard
) -> None:
    n, other = board.create_issue("talk"), board.create_issue("elsewhere")
    state.human_comment(n, "alice", "@fleet-bot please also update the docs")
    state.human_comment(other, "bob", "@fleet-bot not this one")
    (mention,) = board.unread_mentions(n)
    assert (mention.author, mention.body, mention.read) == (
        "alice", "@fleet-bot please also update the docs", False)  # fmt: skip
    board.mark_mentions_read([mention.id])
    assert board.unread_mentions(n) == ()
    assert len(board.unread_mentions(other)) == 1


def test_the_token_is_never_in_repr_or_errors(state: Replayer, tmp_path: Path) -> None:
    cfg = BoardConfig(kind="github", path=None, origin=None, identity="fleet-bot",
                      github=GitHubConfig(owner=state.owner, repo=state.repo, project_number=1,
                                          token_env="FLEET_GH", api_url="https://api.github.test",
                                          token_file=str(tmp_path / "none")))  # fmt: skip
    board = GitHubBoard.from_env(cfg, env={"FLEET_GH": TOKEN})
    assert TOKEN not in repr(board) and TOKEN not in repr(board._http)
    with pytest.raises(BoardError, match="FLEET_GH is empty or unset") as missing:
        GitHubBoard.from_env(cfg, env={})
    assert TOKEN not in str(missing.value)
    wrong = GitHubBoard(owner=state.owner, repo=state.repo, project_number=1, identity="x",
                        token="ghp_wrong_token_value", api_url="https://api.github.test",
                        client=state.client())  # fmt: skip
    with pytest.raises(BoardUnreadable, match="Bad credentials") as bad:
        wrong.read()
    assert "ghp_wrong_token_value" not in str(bad.value)


def test_a_runner_reads_the_token_from_its_private_file(state: Replayer, tmp_path: Path) -> None:
    """A unit starts with a clean environment (the token must not ride on systemd-run's command
    line), so the runner on a worker reads it from a file only its master can read."""
    token_file = tmp_path / "github-token"
    cfg = BoardConfig(kind="github", path=None, origin=None, identity="fleet-bot",
                      github=GitHubConfig(owner=state.owner, repo=state.repo, project_number=1,
                                          token_env="FLEET_GH", token_file=str(token_file)))  # fmt: skip
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    with pytest.raises(BoardError, match="readable by others") as loose:
        GitHubBoard.from_env(cfg, env={})
    assert TOKEN not in str(loose.value)
    token_file.chmod(0o600)
    board = GitHubBoard.from_env(cfg, env={})
    assert board._http._auth["Authorization"] == f"Bearer {TOKEN}"
    other = GitHubBoard.from_env(cfg, env={"FLEET_GH": "ghp_from_env"})  # the variable wins
    assert other._http._auth["Authorization"] == "Bearer ghp_from_env"


def test_graphql_endpoint_on_github_and_enterprise_server() -> None:
    assert graphql_url("https://api.github.com") == "https://api.github.com/graphql"
    assert graphql_url("https://ghe.example/api/v3/") == "https://ghe.example/api/graphql"
