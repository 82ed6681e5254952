"""The query role on AWS's terms: its statements, rendered from terraform/iam.tf (test_iam_policies.py's rendering),
decided by IAM's documented rules (iam_conditions.py) for the requests the query function really makes.

A request's context is built from the parameters the function sends, as the DynamoDB Developer Guide ("Using IAM
policy conditions for fine-grained access control") defines the keys:
- dynamodb:Attributes "Represents a list of the attribute names in a request, or the attributes that are returned from
  a request": the names of the request's Key, of its ProjectionExpression (through ExpressionAttributeNames) and of
  its key condition; a request without a projection returns, so names, every attribute of what it reads.
- dynamodb:Select "Represents the Select parameter of a Query or Scan request"; GetItem has no Select parameter. The
  same guide also says of read actions that "the Select parameter always has a value (ALL_ATTRIBUTES, unless otherwise
  specified)", and the Service Authorization Reference lists dynamodb:Select among GetItem's condition keys. Which of
  the two AWS does for a GetItem the documentation does not settle, so each test runs under both READINGS:
  "query-or-scan" (a GetItem's context has no dynamodb:Select) and "always" (SPECIFIC_ATTRIBUTES with a projection,
  ALL_ATTRIBUTES without). A Query's or Scan's is its Select, or what DynamoDB takes without one ("If neither Select
  nor ProjectionExpression are specified, DynamoDB defaults to ALL_ATTRIBUTES when accessing a table, and
  ALL_PROJECTED_ATTRIBUTES when accessing an index", API Reference, Query).
The role is right when the function's requests are allowed and a download's attributes are not, under both readings.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from leaderboard_core.attributes import NAME_VARIABLES
from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.unit.conftest import TABLE, FakeLambdaContext
from tests.unit.query.aggregates_on_moto import load_boards
from tests.unit.terraform.iam_conditions import Request, decide
from tests.unit.terraform.lambda_environment import function_environment, variable_default
from tests.unit.terraform.test_iam_policies import ACCOUNT, REGION, TABLE_ARN, policy_documents

READINGS = ("query-or-scan", "always")
"""What a GetItem's context holds of dynamodb:Select: nothing, or the Select it would have (module docstring)."""
TABLE_ARNS = {TABLE: TABLE_ARN}
"""The deployed function's AGGREGATES_TABLE_NAME names the table of the aggregates (lambda.tf),
local.aggregates_table_arn, the downloads' own in the default layout; moto's table stands in."""
INDEX_PROJECTION = ("Month", "LeaderboardOrder", "songID", "SK", "DownloadCount")
"""What a Query of the sparse index returns without a projection: its keys, the table's keys, the count."""
A_DOWNLOAD = ("songID", "SK", "UserID", "Timestamp")
"""What a download item holds: what a GetItem without a projection would return of one."""
KEYWORDS = {"AND", "BETWEEN", "begins_with"}
"""Words of a key condition that are not attribute names."""
DAYS = ["2018-01-10", "2018-01-11", "2018-01-12"]
REQUESTS = [
    {"month": "2018-01", "limit": 5},
    {"month": "2018-01", "songID": "song07"},
    {"month": "2018-01", "songID": "song22", "around": 2},
    {"period": "day", "key": DAYS[-1], "last": 3, "limit": 10},
    {"period": "day", "key": DAYS[-1], "songID": "song22", "around": 2},
    {"month": "2018-01", "fromRank": 20, "toRank": 30, "limit": 5},
    {"month": "2018-01", "minCount": 60, "maxCount": 120, "limit": 5},
    {"period": "day", "key": DAYS[-1], "size": True},
    {"month": "2018-01", "songID": "song07", "score": True},
]
"""Every kind of request the function answers: a page, a rank, around-me, a rolling window, around-me on a day, a range
by rank, a range by count, a board's size, a score."""


def query_policy(module: Path = TERRAFORM_MODULE, variables: tuple[tuple[str, str], ...] = ()) -> list[dict[str, Any]]:
    """The query role's statements as IAM JSON: the rendered (test, variable) pairs nested as IAM nests them."""
    statements = []
    for rendered in policy_documents(module, variables, locals_from=TERRAFORM_MODULE)["query"]:
        condition: dict[str, dict[str, list[str]]] = {}
        for (test, variable), values in rendered["Condition"].items():
            condition.setdefault(test, {})[variable] = values
        statements.append(
            {"Effect": rendered["Effect"], "Action": rendered["Action"], "Resource": rendered["Resource"]}
            | ({"Condition": condition} if condition else {})
        )
    return statements


def named_attributes(parameters: dict[str, Any]) -> tuple[str, ...]:
    """The top-level attribute names a request names: its Key's, its projection's, its key condition's."""
    placeholders = parameters.get("ExpressionAttributeNames", {})
    names = list(parameters.get("Key", {}))
    for path in filter(None, parameters.get("ProjectionExpression", "").split(",")):
        head = re.split(r"[.\[]", path.strip(), maxsplit=1)[0]
        names.append(placeholders[head] if head.startswith("#") else head)
    for expression in (parameters.get(name, "") for name in ("KeyConditionExpression", "FilterExpression")):
        names += [placeholders[placeholder] for placeholder in re.findall(r"#\w+", expression)]
        bare = set(re.findall(r"[A-Za-z_]\w*", re.sub(r"[#:]\w+", "", expression)))
        assert bare <= KEYWORDS, f"an attribute named without a placeholder in {expression!r}: {bare - KEYWORDS}"
    return tuple(dict.fromkeys(names))


def request_of(operation: str, parameters: dict[str, Any], reading: str, returned: tuple[str, ...] = ()) -> Request:
    """The IAM request a DynamoDB request is: its action, table or index ARN and context (module docstring)."""
    resource = TABLE_ARNS.get(
        parameters["TableName"], f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{parameters['TableName']}"
    )
    if "IndexName" in parameters:
        resource += f"/index/{parameters['IndexName']}"
    projected = "ProjectionExpression" in parameters
    context: dict[str, str | tuple[str, ...]] = {}
    if operation in ("Query", "Scan"):
        default = "ALL_PROJECTED_ATTRIBUTES" if "IndexName" in parameters else "ALL_ATTRIBUTES"
        context["dynamodb:Select"] = parameters.get("Select", "SPECIFIC_ATTRIBUTES" if projected else default)
    elif reading == "always":
        context["dynamodb:Select"] = "SPECIFIC_ATTRIBUTES" if projected else "ALL_ATTRIBUTES"
    counted = context.get("dynamodb:Select") == "COUNT"
    attributes = named_attributes(parameters) + (() if projected or counted else returned)
    context["dynamodb:Attributes"] = tuple(dict.fromkeys(attributes))
    return Request(f"dynamodb:{operation}", resource, context)


class RecordingClient:
    """moto's DynamoDB client standing in for AWS's: each request the function makes is recorded, then answered."""

    def __init__(self, inner: Any) -> None:
        self._inner, self.requests = inner, []

    def get_item(self, **parameters: Any) -> Any:
        self.requests.append(("GetItem", copy.deepcopy(parameters)))
        return self._inner.get_item(**parameters)

    def query(self, **parameters: Any) -> Any:
        self.requests.append(("Query", copy.deepcopy(parameters)))
        return self._inner.query(**parameters)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the query function called {name}, which this recording does not know: add it")


@pytest.fixture
def recorded(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """What the query function sends to DynamoDB, handler to client, for every kind of request (REQUESTS)."""
    import query
    from boards import Boards
    from index_reads import Layout

    songs = [f"song{n:02d}" for n in range(60)]
    days = {day: {song: 60 - (n + 7 * i) % 60 for n, song in enumerate(songs)} for i, day in enumerate(DAYS)}
    month = {song: sum(day[song] for day in days.values()) for song in songs}
    load_boards(dynamodb, days | {"2018-01": month}, 1)
    client = RecordingClient(dynamodb)
    monkeypatch.setattr(query, "_dynamodb", client)
    monkeypatch.setattr(query, "AGGREGATES_TABLE_NAME", TABLE)
    monkeypatch.setattr(query, "LAYOUT", Layout(1))
    monkeypatch.setattr(query, "BOARDS", Boards(("day", "month")))
    answers = [query.lambda_handler(event, FakeLambdaContext()) for event in REQUESTS]
    assert not [answer for answer in answers if "error" in answer], answers
    assert answers[1]["rank"] is not None
    assert len(answers[2]["items"]) == 5
    assert answers[3]["complete"], answers[3]
    assert answers[3]["reads"]["getItems"] > 0, answers[3]
    assert [item["rank"] for item in answers[5]["items"]] == [20, 21, 22, 23, 24]
    assert len(answers[6]["items"]) == 5, answers[6]
    assert answers[6]["next_token"] is not None
    assert (answers[7]["size"], answers[8]["onBoard"]) == (60, True)
    return client.requests


@pytest.mark.parametrize("reading", READINGS)
def test_every_request_the_query_function_makes_is_allowed(
    recorded: list[tuple[str, dict[str, Any]]], reading: str
) -> None:
    # given the query role as rendered, and what the function sent for a page, a rank, around-me and a rolling window
    policy = query_policy()
    operations = {operation for operation, _ in recorded}
    get_items = [parameters for operation, parameters in recorded if operation == "GetItem"]
    # when IAM decides each request
    decisions = [
        (decide(policy, request_of(operation, parameters, reading, INDEX_PROJECTION)), operation, parameters)
        for operation, parameters in recorded
    ]
    # then the function made GetItems (each with a projection) and Queries, nothing else, and every one is allowed
    assert operations == {"GetItem", "Query"}
    assert all("ProjectionExpression" in parameters for parameters in get_items)
    assert [(operation, parameters) for decision, operation, parameters in decisions if decision != "Allow"] == []


def test_the_functions_get_item_carries_no_select_under_the_query_or_scan_reading(
    recorded: list[tuple[str, dict[str, Any]]],
) -> None:
    # given one GetItem the function sent for a rank
    parameters = next(parameters for operation, parameters in recorded if operation == "GetItem")
    # when its request context is built under each reading
    contexts = {reading: request_of("GetItem", parameters, reading).context for reading in READINGS}
    # then the case the policy must allow: no Select at all, or SPECIFIC_ATTRIBUTES; and only an aggregate's names
    assert "dynamodb:Select" not in contexts["query-or-scan"]
    assert contexts["always"]["dynamodb:Select"] == "SPECIFIC_ATTRIBUTES"
    assert set(contexts["always"]["dynamodb:Attributes"]) <= {"songID", "SK", "DownloadCount", "LeaderboardOrder"}


def a_get_item(projection: list[str] | None) -> dict[str, Any]:
    """A GetItem of one item of the table, naming `projection` (through placeholders), or all attributes (None)."""
    parameters: dict[str, Any] = {"TableName": TABLE, "Key": {"songID": {"S": "song01"}, "SK": {"S": "d1"}}}
    if projection is not None:
        names = {f"#a{n}": name for n, name in enumerate(projection)}
        parameters |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
    return parameters


@pytest.mark.parametrize("reading", READINGS)
@pytest.mark.parametrize(
    "projection",
    [["DownloadCount", "UserID"], ["UserID"], ["Timestamp"], None],
    ids=["count and UserID", "UserID", "Timestamp", "no projection"],
)
def test_a_get_item_reading_a_downloads_attributes_is_denied(projection: list[str] | None, reading: str) -> None:
    # given the query role, and a GetItem of a download naming one of its own attributes, or none (all of them)
    request = request_of("GetItem", a_get_item(projection), reading, A_DOWNLOAD)
    # when IAM decides it
    decision = decide(query_policy(), request)
    # then no statement allows it
    assert decision == "ImplicitDeny", request


@pytest.mark.parametrize("reading", READINGS)
def test_a_scan_is_denied_even_naming_only_an_aggregates_attributes(reading: str) -> None:
    # given a Scan of the table asking for an aggregate's attributes only
    parameters = a_get_item(["songID", "SK", "DownloadCount"]) | {"Select": "SPECIFIC_ATTRIBUTES"}
    del parameters["Key"]
    # when IAM decides it
    decision = decide(query_policy(), request_of("Scan", parameters, reading))
    # then it is denied: no statement names Scan
    assert decision == "ImplicitDeny"


@pytest.mark.parametrize(
    ("select", "expected"),
    [(None, "Allow"), ("SPECIFIC_ATTRIBUTES", "Allow"), ("ALL_ATTRIBUTES", "ImplicitDeny")],
    ids=["Select absent", "SPECIFIC_ATTRIBUTES", "ALL_ATTRIBUTES"],
)
def test_a_get_item_limited_to_an_aggregates_attributes_is_allowed_unless_it_selects_all(
    select: str | None, expected: str
) -> None:
    # given a GetItem naming exactly what the policy allows, its context with or without dynamodb:Select
    (statement,) = [s for s in query_policy() if "dynamodb:GetItem" in s["Action"]]
    allowed = tuple(statement["Condition"]["ForAllValues:StringEquals"]["dynamodb:Attributes"])
    context: dict[str, str | tuple[str, ...]] = {"dynamodb:Attributes": allowed}
    if select is not None:
        context["dynamodb:Select"] = select
    # when IAM decides it
    decision = decide(query_policy(), Request("dynamodb:GetItem", TABLE_ARN, context))
    # then a missing Select does not refuse it (IfExists), and asking for all attributes does
    assert decision == expected


@pytest.mark.parametrize(
    ("operation", "parameters"),
    [
        ("GetItem", a_get_item(["DownloadCount"]) | {"TableName": "app-progress"}),
        (
            "Query",
            {"TableName": TABLE, "KeyConditionExpression": "#p = :p", "ExpressionAttributeNames": {"#p": "songID"}},
        ),
        (
            "Query",
            {"TableName": TABLE, "IndexName": "OtherIndex", "KeyConditionExpression": "#p = :p"}
            | {"ExpressionAttributeNames": {"#p": "Month"}},
        ),
    ],
    ids=["GetItem of another table", "Query of the table", "Query of another index"],
)
def test_reads_beyond_the_table_and_its_leaderboard_index_are_denied(
    operation: str, parameters: dict[str, Any]
) -> None:
    # given a read of another table, of the table itself by Query, or of another index
    request = request_of(operation, parameters, "always", A_DOWNLOAD)
    # when IAM decides it
    decision = decide(query_policy(), request)
    # then no statement's resource matches it
    assert decision == "ImplicitDeny", request


def with_select_tested_by(test: str, into: Path) -> Path:
    """A copy of the module whose query role tests dynamodb:Select with `test` (before the fix: StringEquals)."""
    for path in TERRAFORM_MODULE.glob("*.tf"):
        (into / path.name).write_text(path.read_text())
    iam = into / "iam.tf"
    text = iam.read_text()
    start = text.index('sid       = "ReadOneAggregate"')
    old = 'test     = "StringEqualsIfExists"\n      variable = "dynamodb:Select"'
    position = text.index(old, start)
    iam.write_text(text[:position] + old.replace("StringEqualsIfExists", test) + text[position + len(old) :])
    return into


@pytest.mark.parametrize(("reading", "expected"), [("query-or-scan", "ImplicitDeny"), ("always", "Allow")])
def test_string_equals_on_select_would_deny_the_functions_get_item_where_the_context_has_no_select(
    recorded: list[tuple[str, dict[str, Any]]], reading: str, expected: str, tmp_path: Path
) -> None:
    # given the role as it was (StringEquals on dynamodb:Select), and the GetItem the function sends for a rank
    naive = query_policy(with_select_tested_by("StringEquals", tmp_path))
    (statement,) = [s for s in naive if "dynamodb:GetItem" in s["Action"]]
    assert statement["Condition"]["StringEquals"] == {"dynamodb:Select": ["SPECIFIC_ATTRIBUTES"]}
    parameters = next(parameters for operation, parameters in recorded if operation == "GetItem")
    # when IAM decides it under each reading
    decision = decide(naive, request_of("GetItem", parameters, reading))
    # then it is refused where GetItem's context has no Select (and with it every rank), allowed only where it has one
    assert decision == expected


class StubClient:
    """A DynamoDB client that records each request and answers it as for an item or a partition that does not exist."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def get_item(self, **parameters: Any) -> Any:
        self.requests.append(("GetItem", copy.deepcopy(parameters)))
        return {}

    def query(self, **parameters: Any) -> Any:
        self.requests.append(("Query", copy.deepcopy(parameters)))
        return {"Items": [], "Count": 0}


RENAMED = (("count_attribute_name", "Plays"), ("entity_attribute_name", "trackId"), ("order_attribute_name", "Rank"))


@pytest.mark.parametrize("reading", READINGS)
def test_the_functions_get_items_are_allowed_with_renamed_attributes(reading: str) -> None:
    import query
    from boards import Board
    from entity_rank import RankRequest, answer
    from read_context import ReadContext

    # given a deployment that renames the entity, count and order attributes: its query role, and the function's
    # schema from the environment lambda.tf gives it for those variables
    variables = dict(RENAMED)
    environment = {
        name: variables.get(value.removeprefix("${var.").removesuffix("}"), variable_default(value[6:-1]))
        for name, value in function_environment("query").items()
        if name in NAME_VARIABLES.values()
    }
    schema = query.schema_from_environment(environment)
    assert (schema.entity, schema.count, schema.order) == ("trackId", "Plays", "Rank")
    policy = query_policy(variables=RENAMED)
    # when the function reads one aggregate for a rank and one for a rolling window's point read
    client = StubClient()
    reads = ReadContext(client, TABLE, schema, query.LAYOUT)
    answer(reads, RankRequest(Board.month("2018-01"), "track1"))
    reads.aggregate("2018-01-12", "track1")  # a rolling window's point read
    # then both GetItems name only the renamed keys and count, and are allowed
    assert [operation for operation, _ in client.requests] == ["GetItem", "GetItem"]
    decisions = [
        decide(policy, request_of(operation, parameters, reading)) for operation, parameters in client.requests
    ]
    assert decisions == ["Allow", "Allow"], client.requests
