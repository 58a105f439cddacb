"""The GraphQL documents the GitHub board sends, and the published cost formula they are priced by.

Every document here is validated against GitHub's published schema in
``tests/github/test_github_schema.py`` and every recorded answer is checked against the fields its
document asks for, so a field GitHub does not have fails the suite, not production.

Cost (D1): "every field added to the query is cost-measured before it ships". :func:`query_cost`
is GitHub's published formula (docs.github.com, "Rate limits and query limits for the GraphQL API"):
add up the requests needed to fulfil each connection — a connection's requests are the product of
the ``first``/``last`` of the connections around it — divide by 100, round, and charge at least 1.
The page reads only per-item fields whose connections are cheap to fan out; the two lists that are
not needed on the page (sub-issues and blockers) ride behind their summaries and are fetched only
for candidates (:data:`EDGES`), the way D1 moved its 143-point field off the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphql import FieldNode, FragmentSpreadNode, InlineFragmentNode, parse
from graphql.language import (
    FragmentDefinitionNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
)

# GitHub's maximum for ``first``/``last`` (its node limit rule: 1-100). Used wherever a list must
# be complete: the last 100 comments hold the last marker and every attempt of a run history far
# longer than the attempt cap (3, fleet.core.model.Policy); a parent holds at most 100 sub-issues.
MAX_PAGE = 100
# Labels and assignees per issue: the hold labels and the fixture label (predicate 9) must be seen.
# 50 labels on one issue has never been observed here; the read fails loudly past it (see
# github.py) rather than silently dropping a hold label.
LABELS_PER_ISSUE = 50
ASSIGNEES_PER_ISSUE = 20  # GitHub's documented maximum is 10 assignees per issue
CLOSING_PRS = 50  # PRs referencing one issue; more would be a defect of its own
CLOSERS = 10  # the issue's last close/reopen events: the latest says whether a PR closed it
PROJECT_ITEMS_PER_ISSUE = 20  # boards one issue sits on; we look for ours among them
PROJECT_FIELDS = 50  # fields on the board; GitHub allows 50 custom fields per project

_RATE = "rateLimit { cost remaining resetAt }"
_REF = "number state repository { nameWithOwner }"

# One comment as every read of an issue's comments sees it: the page's last comments and the
# older pages behind them are parsed alike, so they ask for the same fields.
COMMENT_FIELDS = """fragment CommentFields on IssueComment {
  databaseId author { login } authorAssociation body createdAt
}
"""

# One issue as every read sees it. ``__typename`` is asked wherever a union or interface is
# narrowed, so the answer says which fragment applied (the fixture checker needs it too).
ISSUE_FIELDS = f"""
fragment IssueFields on Issue {{
  id
  databaseId
  number
  title
  body
  state
  stateReason
  createdAt
  updatedAt
  closedAt
  lastEditedAt
  author {{ login }}
  authorAssociation
  repository {{ nameWithOwner }}
  labels(first: {LABELS_PER_ISSUE}) {{ totalCount nodes {{ name }} }}
  assignees(first: {ASSIGNEES_PER_ISSUE}) {{ nodes {{ login }} }}
  parent {{ {_REF} }}
  subIssuesSummary {{ total completed }}
  issueDependenciesSummary {{ blockedBy totalBlockedBy }}
  comments(last: {MAX_PAGE}) {{
    totalCount
    pageInfo {{ hasPreviousPage startCursor }}
    nodes {{ ...CommentFields }}
  }}
  timelineItems(
    last: {MAX_PAGE},
    itemTypes: [CLOSED_EVENT, REOPENED_EVENT, LABELED_EVENT, UNLABELED_EVENT, RENAMED_TITLE_EVENT]
  ) {{
    nodes {{
      __typename
      ... on ClosedEvent {{ createdAt stateReason actor {{ login }} }}
      ... on ReopenedEvent {{ createdAt actor {{ login }} }}
      ... on LabeledEvent {{ createdAt actor {{ login }} label {{ name }} }}
      ... on UnlabeledEvent {{ createdAt actor {{ login }} label {{ name }} }}
      ... on RenamedTitleEvent {{ createdAt actor {{ login }} }}
    }}
  }}
}}
{COMMENT_FIELDS}"""

# The board's Status and Lane: Status is single-select (predicate 1); Lane may be single-select or
# text (docs/github.md), so both shapes are read.
FIELD_VALUE = """
fragment FieldValue on ProjectV2ItemFieldValue {
  __typename
  ... on ProjectV2ItemFieldSingleSelectValue { name }
  ... on ProjectV2ItemFieldTextValue { text }
}
"""

# What can be work (#11 item 6): open issues only, filtered by GitHub (ProjectV2.items(query:),
# the project view's filter syntax), so a cycle's cost follows the open items, not the board's
# whole history of Done and closed ones.
ITEMS_FILTER = "is:issue is:open"

# D1: the one paginated read per cycle. Cost with page size 50: 1 (items) + 4 x 50 (labels,
# assignees, comments, timeline per item) = 201 requests -> 2 points a page of OPEN items.
BOARD_PAGE = f"""
query BoardPage($owner: String!, $project: Int!, $first: Int!, $after: String, $query: String!,
                $statusField: String!, $laneField: String!) {{
  {_RATE}
  repositoryOwner(login: $owner) {{
    __typename
    ... on ProjectV2Owner {{
      projectV2(number: $project) {{
        items(first: $first, after: $after, query: $query) {{
          pageInfo {{ hasNextPage endCursor }}
          nodes {{
            id
            isArchived
            status: fieldValueByName(name: $statusField) {{ ...FieldValue }}
            lane: fieldValueByName(name: $laneField) {{ ...FieldValue }}
            content {{ __typename ... on Issue {{ ...IssueFields }} }}
          }}
        }}
      }}
    }}
  }}
}}
{ISSUE_FIELDS}
{FIELD_VALUE}
"""

# The per-candidate lists behind the page's summaries (D1's expensive field, paid per candidate).
EDGES = f"""
query Edges($ids: [ID!]!) {{
  {_RATE}
  nodes(ids: $ids) {{
    __typename
    ... on Issue {{
      id
      subIssues(first: {MAX_PAGE}) {{ nodes {{ {_REF} }} }}
      blockedBy(first: {MAX_PAGE}) {{ nodes {{ {_REF} }} }}
    }}
  }}
}}
"""

# A fresh read of one issue (pre-flight, the runner's check 11): everything, lists included, and
# its place on our board.
ISSUE = f"""
query Issue($owner: String!, $name: String!, $number: Int!,
            $statusField: String!, $laneField: String!) {{
  {_RATE}
  repository(owner: $owner, name: $name) {{
    issue(number: $number) {{
      ...IssueFields
      subIssues(first: {MAX_PAGE}) {{ nodes {{ {_REF} }} }}
      blockedBy(first: {MAX_PAGE}) {{ nodes {{ {_REF} }} }}
      projectItems(first: {PROJECT_ITEMS_PER_ISSUE}) {{
        nodes {{
          id
          project {{ id number }}
          status: fieldValueByName(name: $statusField) {{ ...FieldValue }}
          lane: fieldValueByName(name: $laneField) {{ ...FieldValue }}
        }}
      }}
    }}
  }}
}}
{ISSUE_FIELDS}
{FIELD_VALUE}
"""

# Older comments of one issue, newest first, when it has more than one page of them.
OLDER_COMMENTS = f"""
query OlderComments($id: ID!, $before: String!) {{
  {_RATE}
  node(id: $id) {{
    __typename
    ... on Issue {{
      comments(last: {MAX_PAGE}, before: $before) {{
        pageInfo {{ hasPreviousPage startCursor }}
        nodes {{ ...CommentFields }}
      }}
    }}
  }}
}}
{COMMENT_FIELDS}"""

# D2/D16: who would close this issue. ``includeClosedPrs`` keeps a closed-unmerged PR visible, so
# "merged" is checked here, by us, never inferred from the list being non-empty.
CLOSING_PULL_REQUESTS = f"""
query ClosingPullRequests($owner: String!, $name: String!, $number: Int!) {{
  {_RATE}
  repository(owner: $owner, name: $name) {{
    issue(number: $number) {{
      state
      timelineItems(last: {CLOSERS}, itemTypes: [CLOSED_EVENT, REOPENED_EVENT]) {{
        nodes {{
          __typename
          ... on ClosedEvent {{
            closer {{ __typename ... on PullRequest {{ number repository {{ nameWithOwner }} }} }}
          }}
        }}
      }}
      closedByPullRequestsReferences(first: {CLOSING_PRS}, includeClosedPrs: true) {{
        nodes {{
          number title body headRefName state merged createdAt mergedAt
          author {{ login }}
          repository {{ nameWithOwner }}
        }}
      }}
    }}
  }}
}}
"""

# D19: the issue's last comments with whether the token's user reacted 👀 to each: the fleet's
# record of which mentions it already injected into a brief (#11 item 2). ``reactionGroups`` is a
# list, not a connection: the document costs 1 point.
MENTIONS = f"""
query Mentions($owner: String!, $name: String!, $number: Int!) {{
  {_RATE}
  repository(owner: $owner, name: $name) {{
    issue(number: $number) {{
      comments(last: {MAX_PAGE}) {{
        nodes {{
          databaseId author {{ login }} authorAssociation body createdAt
          reactionGroups {{ content viewerHasReacted }}
        }}
      }}
    }}
  }}
}}
"""

# The board's own ids (project, fields, single-select options): configuration, not queue state.
PROJECT = f"""
query Project($owner: String!, $project: Int!) {{
  {_RATE}
  repositoryOwner(login: $owner) {{
    __typename
    ... on ProjectV2Owner {{
      projectV2(number: $project) {{
        id
        fields(first: {PROJECT_FIELDS}) {{
          nodes {{
            __typename
            ... on ProjectV2FieldCommon {{ id name dataType }}
            ... on ProjectV2SingleSelectField {{ options {{ id name }} }}
          }}
        }}
      }}
    }}
  }}
}}
"""

# The issue's node id and its item on our board (writes to Status and Lane need the item).
ISSUE_ITEM = f"""
query IssueItem($owner: String!, $name: String!, $number: Int!) {{
  {_RATE}
  repository(owner: $owner, name: $name) {{
    issue(number: $number) {{
      id
      projectItems(first: {PROJECT_ITEMS_PER_ISSUE}) {{ nodes {{ id project {{ id }} }} }}
    }}
  }}
}}
"""

# Who the token is (#11 item 3): the login every write is attributed to (D18), checked against the
# inventory's identity once per command that writes.
VIEWER = f"""
query Viewer {{
  {_RATE}
  viewer {{ login }}
}}
"""

ADD_ITEM = """
mutation AddItem($project: ID!, $content: ID!) {
  addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } }
}
"""

SET_FIELD = """
mutation SetField($project: ID!, $item: ID!, $field: ID!, $value: ProjectV2FieldValue!) {
  updateProjectV2ItemFieldValue(
    input: {projectId: $project, itemId: $item, fieldId: $field, value: $value}
  ) { projectV2Item { id } }
}
"""

CLEAR_FIELD = """
mutation ClearField($project: ID!, $item: ID!, $field: ID!) {
  clearProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, fieldId: $field}) {
    projectV2Item { id }
  }
}
"""

# Who the server is (#11 item 7): a GitHub Enterprise Server release may predate issue
# dependencies and the items filter. Asked once per board instance, off GitHub.com only.
FEATURES = f"""
query Features {{
  {_RATE}
  issue: __type(name: "Issue") {{ fields {{ name }} }}
  project: __type(name: "ProjectV2") {{ fields {{ name args {{ name }} }} }}
}}
"""


def without_dependencies(document: str) -> str:
    """``document`` for a server without issue dependencies: no blockers, no dependency summary."""
    lines = [ln for ln in document.splitlines()
             if "issueDependenciesSummary" not in ln and not ln.strip().startswith("blockedBy(")]  # fmt: skip
    return "\n".join(lines) + "\n"


def without_items_filter(document: str) -> str:
    """``document`` for a server whose ``ProjectV2.items`` takes no ``query``: every item is read."""
    return document.replace(", $query: String!", "").replace(", query: $query", "")


def for_server(document: str, *, dependencies: bool, items_filter: bool) -> str:
    if not dependencies:
        document = without_dependencies(document)
    if not items_filter:
        document = without_items_filter(document)
    return document


DOCUMENTS: dict[str, str] = {
    "BOARD_PAGE": BOARD_PAGE,
    "EDGES": EDGES,
    "ISSUE": ISSUE,
    "OLDER_COMMENTS": OLDER_COMMENTS,
    "CLOSING_PULL_REQUESTS": CLOSING_PULL_REQUESTS,
    "PROJECT": PROJECT,
    "ISSUE_ITEM": ISSUE_ITEM,
    "VIEWER": VIEWER,
    "MENTIONS": MENTIONS,
    "FEATURES": FEATURES,
    "ADD_ITEM": ADD_ITEM,
    "SET_FIELD": SET_FIELD,
    "CLEAR_FIELD": CLEAR_FIELD,
}

# What an older server (GitHub Enterprise Server without dependencies or the items filter) is
# sent instead; validated against the older published schema in the tests.
OLDER_SERVER_DOCUMENTS: dict[str, str] = {
    name: for_server(DOCUMENTS[name], dependencies=False, items_filter=False)
    for name in ("BOARD_PAGE", "EDGES", "ISSUE")
}


# --- the published cost formula -----------------------------------------------------------------


def _int_arg(value: Any, variables: Mapping[str, Any]) -> int | None:
    if isinstance(value, IntValueNode):
        return int(value.value)
    if isinstance(value, VariableNode):
        got = variables.get(value.name.value)
        return got if isinstance(got, int) else None
    return None


def _list_len(value: Any, variables: Mapping[str, Any]) -> int | None:
    if isinstance(value, ListValueNode):
        return len(value.values)
    if isinstance(value, VariableNode):
        got = variables.get(value.name.value)
        return len(got) if isinstance(got, list | tuple) else None
    return None


def connection_requests(document: str, variables: Mapping[str, Any] | None = None) -> int:
    """How many requests GitHub needs to fulfil every connection ``document`` asks for.

    A field with ``first``/``last`` is a connection: it costs the product of the page sizes of the
    connections around it, and multiplies the requests of everything beneath it by its own size.
    ``nodes(ids:)`` is not a connection in the published formula; it is counted as ``len(ids)``
    parents so that per-candidate lists are priced per candidate (an overestimate if GitHub counts
    it as one).
    """
    variables = variables or {}
    doc = parse(document)
    fragments = {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}
    total = 0

    def walk(selection_set: SelectionSetNode | None, parents: int) -> None:
        nonlocal total
        for sel in selection_set.selections if selection_set else ():
            if isinstance(sel, FieldNode):
                args = {a.name.value: a.value for a in sel.arguments or ()}
                size = _int_arg(args.get("first"), variables) or _int_arg(
                    args.get("last"), variables
                )
                if size is not None:
                    total += parents
                    walk(sel.selection_set, parents * size)
                elif "ids" in args:
                    walk(sel.selection_set, parents * (_list_len(args["ids"], variables) or 1))
                else:
                    walk(sel.selection_set, parents)
            elif isinstance(sel, InlineFragmentNode):
                walk(sel.selection_set, parents)
            elif isinstance(sel, FragmentSpreadNode):
                walk(fragments[sel.name.value].selection_set, parents)

    for definition in doc.definitions:
        if isinstance(definition, OperationDefinitionNode):
            walk(definition.selection_set, 1)
    return total


def query_cost(document: str, variables: Mapping[str, Any] | None = None) -> int:
    """GitHub's published rate-limit score of ``document``: requests / 100, rounded, at least 1."""
    requests = connection_requests(document, variables)
    return max(1, int(requests / 100 + 0.5))
