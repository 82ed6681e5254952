"""The functions' policies: no wildcard resource, and narrowed by condition keys where AWS allows it.

The policies are rendered from every `aws_iam_policy_document` of the module (static blocks and
`dynamic "statement"` blocks, each for_each value), with each reference replaced by the value it
has on AWS (REFERENCES; the module's attribute lists are evaluated by `terraform console`). A
reference the test does not know fails it: whoever adds one says what it is. A rendered resource
is a wildcard when it holds a "*", except:
- actions without resource-level permissions, where "*" is the only resource AWS matches (Service
  Authorization Reference): X-Ray's PutTraceSegments and PutTelemetryRecords, DynamoDB's ListStreams;
- suffixes scoped under one named resource: this table's streams (the stream label changes when
  the stream is recreated) and the log streams of each function's own log group.
A condition value is a wildcard when it holds a "*", except the aggregate's bookkeeping attributes,
whose names carry a stream shard's hash ("Watermark_*"), in a StringLike dynamodb:Attributes test.
Every role policy must come from such a document, and no managed policy is attached.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from leaderboard_dev.settings import TERRAFORM_MODULE
from tests.terraform_cli import terraform
from tests.terraform_config import hcl_document

ACCOUNT, REGION = "123456789012", "us-east-1"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-downloads"
LOG_GROUPS = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda"
KMS_KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
SOURCE_TABLE_KMS_KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/66666666-7777-8888-9999-000000000000"
"""The key a platform's own table is encrypted under, as data.aws_dynamodb_table.source reads it."""
VIA_DYNAMODB, VIA_SQS = f"dynamodb.{REGION}.amazonaws.com", f"sqs.{REGION}.amazonaws.com"
REFERENCES = {
    "local.table_arn": TABLE_ARN,
    "local.aggregates_table_arn": TABLE_ARN,
    "local.leaderboard_index_arn": f"{TABLE_ARN}/index/MonthDownloadsIndex",
    "aws_sqs_queue.failures[0].arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:app-aggregator-failures",
    "aws_sqs_queue.recount_bands[0].arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:app-recount-bands",
    "aws_dynamodb_table.progress[0].arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-progress",
    "aws_cloudwatch_log_group.aggregator[0].arn": f"{LOG_GROUPS}/app-aggregator",
    "aws_cloudwatch_log_group.query[0].arn": f"{LOG_GROUPS}/app-query",
    "local.kms_via_dynamodb": VIA_DYNAMODB,
    "local.kms_via_sqs": VIA_SQS,
    "data.aws_caller_identity.current[0].account_id": ACCOUNT,
    "aws_lambda_function.aggregator[0].arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:app-aggregator",
}
EVALUATED_LISTS = ("local.query_item_attributes", "local.aggregate_attributes")
"""List-valued locals, evaluated by `terraform console` for the variables a test gives."""
CLAIMS_TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-claims"
DYNAMIC_VALUES = {
    "${var.kms_key_arn == null ? [] : [var.kms_key_arn]}": [KMS_KEY_ARN],
    "${local.claims_table_enabled ? [aws_dynamodb_table.claims[0].arn] : []}": [CLAIMS_TABLE_ARN],
    "${local.source_table_kms_key_arn == null ? [] : [local.source_table_kms_key_arn]}": [SOURCE_TABLE_KMS_KEY_ARN],
    "${var.retractions ? [local.table_arn] : []}": [TABLE_ARN],
}
UNSCOPED_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "dynamodb:ListStreams"}
SCOPED_SUFFIXES = [
    re.compile(rf"^{re.escape(TABLE_ARN)}/stream/\*$"),
    re.compile(rf"^arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/app-(aggregator|query):\*$"),
]
ATTRIBUTE_PATTERNS = {"Watermark_*", "WatermarksPruned*"}
DOWNLOAD_ONLY_ATTRIBUTES = {"UserID", "Timestamp", "ExpiresAt"}


@functools.cache
def private_copy(module: Path) -> Path:
    """The module copied for this test process, initialised apart: `terraform console` takes the folder's state lock,
    which another worker's console in the same folder holds ("Error acquiring the state lock"), and has no -lock."""
    copy = Path(tempfile.mkdtemp(prefix="policies-")) / module.name
    shutil.copytree(
        module, copy, ignore=shutil.ignore_patterns(".terraform*", "terraform.tfstate*", "tests", "examples")
    )
    return copy


@functools.cache
def evaluated_lists(module: Path, variables: tuple[tuple[str, str], ...] = ()) -> dict[str, list[str]]:
    """The module's list-valued locals for these variables, as Terraform computes them (no plan, no AWS)."""
    module = private_copy(module)
    assert terraform(module, "init", "-backend=false", "-input=false").returncode == 0
    text = "\n".join(path.read_text() for path in module.glob("*.tf"))
    declared = [name for name in EVALUATED_LISTS if re.search(rf"^\s*{name.removeprefix('local.')}\s*=", text, re.M)]
    expression = "jsonencode({" + ", ".join(f'"{name}" = {name}' for name in declared) + "})"
    arguments = [f"-var={name}={value}" for name, value in (("name", "app"), *variables)]
    result = terraform(module, "console", *arguments, input=expression, timeout=300)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(json.loads(result.stdout.strip().splitlines()[-1])))


def literal(value: str, extra: dict[str, str]) -> str:
    """An HCL string as python-hcl2 gives it, with its interpolations replaced by the values they have."""
    text = value[1:-1] if value.startswith('"') and value.endswith('"') else value

    def resolve(match: re.Match[str]) -> str:
        reference = match.group(1).strip()
        known = {**REFERENCES, **extra}
        if reference not in known:
            raise AssertionError(f"unknown reference in a policy: {reference} (add what it is on AWS to REFERENCES)")
        return known[reference]

    return re.sub(r"\$\{([^}]*)\}", resolve, text)


def values(value: str | list[str], extra: dict[str, str], lists: dict[str, list[str]]) -> list[str]:
    """A condition's values: a list of strings, or one reference to a list-valued local."""
    if isinstance(value, str):
        reference = value.removeprefix("${").removesuffix("}")
        assert reference in lists, f"unknown list in a condition: {value} (add it to EVALUATED_LISTS)"
        return lists[reference]
    return [literal(item, extra) for item in value]


def statements(document: dict[str, Any], lists: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The document's statements, rendered: static ones, then each dynamic block per for_each value."""
    rendered = [render(statement, {}, lists) for statement in document.get("statement", [])]
    for dynamic in document.get("dynamic", []):
        for label, body in dynamic.items():
            assert label.strip('"') == "statement", label
            for_each = DYNAMIC_VALUES.get(body["for_each"])
            assert for_each is not None, f"unknown for_each of a dynamic statement: {body['for_each']}"
            for value in for_each:
                rendered += [render(content, {"statement.value": value}, lists) for content in body["content"]]
    return rendered


def render(statement: dict[str, Any], extra: dict[str, str], lists: dict[str, list[str]]) -> dict[str, Any]:
    assert "not_resources" not in statement, "NotResource grants everything else: not allowed"
    assert "not_actions" not in statement, "NotAction grants everything else: not allowed"
    return {
        "Sid": literal(statement.get("sid", '"(no sid)"'), extra),
        "Effect": literal(statement.get("effect", '"Allow"'), extra),
        "Action": [literal(action, extra) for action in statement.get("actions", [])],
        "Resource": [literal(resource, extra) for resource in statement.get("resources", [])],
        "Principal": {
            literal(principal["type"], extra): [literal(name, extra) for name in principal["identifiers"]]
            for principal in statement.get("principals", [])
        },
        "Condition": {
            (literal(condition["test"], extra), literal(condition["variable"], extra)): values(
                condition["values"], extra, lists
            )
            for condition in statement.get("condition", [])
        },
    }


def policy_documents(
    module: Path, variables: tuple[tuple[str, str], ...] = (), locals_from: Path = TERRAFORM_MODULE
) -> dict[str, list[dict[str, Any]]]:
    """Every policy document of `module`; list-valued locals evaluated in `locals_from` (a copy's original)."""
    lists = evaluated_lists(locals_from, variables)
    documents = {}
    for path in sorted(module.glob("*.tf")):
        parsed = hcl_document(path)
        for block in parsed.get("data", []):
            for kind, bodies in block.items():
                if kind.strip('"') == "aws_iam_policy_document":
                    for name, body in bodies.items():
                        documents[name.strip('"')] = statements(body, lists)
    return documents


def wildcards(module: Path) -> list[str]:
    found = []
    for name, rendered in policy_documents(module).items():
        for statement in rendered:
            for resource in statement["Resource"]:
                if "*" not in resource:
                    continue
                if resource == "*" and set(statement["Action"]) <= UNSCOPED_ACTIONS:
                    continue
                if any(pattern.match(resource) for pattern in SCOPED_SUFFIXES):
                    continue
                found.append(f"{name} {statement['Sid']}: {statement['Action']} on {resource}")
            for (test, variable), condition_values in statement["Condition"].items():
                for value in condition_values:
                    if "*" not in value:
                        continue
                    if (test, variable) == ("ForAllValues:StringLike", "dynamodb:Attributes") and (
                        value in ATTRIBUTE_PATTERNS
                    ):
                        continue
                    found.append(f"{name} {statement['Sid']}: {test} {variable} {value}")
    return found


def granting(documents: dict[str, list[dict[str, Any]]], role: str, action: str) -> list[dict[str, Any]]:
    return [statement for statement in documents[role] if action in statement["Action"]]


def test_the_policies_name_no_wildcard_resource_or_condition() -> None:
    documents = policy_documents(TERRAFORM_MODULE)
    # the rendering found the functions' policies, with their ARNs and conditions in place
    assert {"aggregator", "query", "tracing", "lambda_assume_role"} <= set(documents)
    assert any(KMS_KEY_ARN in statement["Resource"] for statement in documents["aggregator"])
    assert any(statement["Condition"] for statement in documents["query"])
    assert wildcards(TERRAFORM_MODULE) == []


def test_the_schedule_may_only_invoke_the_aggregator_and_only_for_this_account() -> None:
    documents = policy_documents(TERRAFORM_MODULE)
    # given the lineage sweep's role: what it may do, and who may assume it
    (statement,) = documents["lineage_sweep"]
    (trust,) = documents["lineage_sweep_assume_role"]
    # then it invokes the aggregator and nothing else, and only EventBridge Scheduler of this account assumes it
    assert (statement["Action"], statement["Resource"]) == (
        ["lambda:InvokeFunction"],
        [f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:app-aggregator"],
    )
    assert trust["Principal"] == {"Service": ["scheduler.amazonaws.com"]}
    assert trust["Condition"][("StringEquals", "aws:SourceAccount")] == [ACCOUNT]


def test_list_streams_is_granted_on_the_only_resource_aws_matches_it_with() -> None:
    # given the aggregator's policy: ListStreams has no resource type (Service Authorization Reference)
    (statement,) = granting(policy_documents(TERRAFORM_MODULE), "aggregator", "dynamodb:ListStreams")
    # then it is granted on "*", alone in its statement, so that "*" grants nothing else
    assert (statement["Action"], statement["Resource"]) == (["dynamodb:ListStreams"], ["*"])


def test_with_retractions_the_aggregator_may_describe_the_table_whose_stream_it_reads_and_no_other() -> None:
    # given the aggregator's policy with retractions on (the replica guard asks DescribeTable for replicas)
    (statement,) = granting(policy_documents(TERRAFORM_MODULE), "aggregator", "dynamodb:DescribeTable")
    # then DescribeTable is granted alone, on the watched table only (local.table_arn: the module's or the source's)
    assert (statement["Action"], statement["Resource"]) == (["dynamodb:DescribeTable"], [TABLE_ARN])


def test_the_describe_table_statement_is_there_only_with_retractions() -> None:
    # given the module's aggregator policy as written
    text = (TERRAFORM_MODULE / "iam.tf").read_text()
    block = text[text.index('sid       = "DescribeTheWatchedTable"') - 200 :]
    # then its statement is made for each value of a for_each that is empty without retractions
    assert "for_each = var.retractions ? [local.table_arn] : []" in block


@pytest.mark.parametrize(
    "variables",
    [(), (("count_attribute_name", "Plays"), ("entity_attribute_name", "trackId"))],
    ids=["default names", "renamed attributes"],
)
def test_the_query_role_reads_only_an_aggregates_count_and_order(variables: tuple[tuple[str, str], ...]) -> None:
    names = dict(variables)
    entity, count = names.get("entity_attribute_name", "songID"), names.get("count_attribute_name", "DownloadCount")
    (statement,) = granting(policy_documents(TERRAFORM_MODULE, variables), "query", "dynamodb:GetItem")
    # then a GetItem may name only keys, index keys and the count, and not ask for all attributes (Select, where the
    # request carries it: test_query_role_conditions.py decides the requests)
    assert statement["Condition"][("StringEqualsIfExists", "dynamodb:Select")] == ["SPECIFIC_ATTRIBUTES"]
    allowed = statement["Condition"][("ForAllValues:StringEquals", "dynamodb:Attributes")]
    assert sorted(allowed) == sorted([entity, "SK", "Month", "LeaderboardOrder", count])
    assert not DOWNLOAD_ONLY_ATTRIBUTES & set(allowed)


def requested_attributes(parameters: dict[str, Any]) -> set[str]:
    """The top-level attribute names a request names: its key's and those of its expressions."""
    return set(parameters.get("Key", {})) | set(parameters.get("ExpressionAttributeNames", {}).values())


def test_the_query_functions_get_item_is_what_its_policy_allows(dynamodb: Any) -> None:
    import entity_rank
    from boards import Board
    from entity_rank import RankRequest
    from index_reads import IndexSchema, Layout
    from read_context import ReadContext
    from tests.unit.query.aggregates_on_moto import load_month

    # given the query role's GetItem statement and a month of aggregates
    (statement,) = granting(policy_documents(TERRAFORM_MODULE), "query", "dynamodb:GetItem")
    allowed = set(statement["Condition"][("ForAllValues:StringEquals", "dynamodb:Attributes")])
    load_month(dynamodb, {"song1": 3, "song2": 5}, 1)
    requests: list[dict[str, Any]] = []
    dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", lambda params, **_: requests.append(params))
    # when the function answers a rank
    january_rank = RankRequest(Board.month("2018-01"), "song1")
    rank = entity_rank.answer(ReadContext(dynamodb, "test-downloads", IndexSchema(), Layout(1)), january_rank)
    # then its GetItem names its attributes (a projection) and only allowed ones
    assert rank["rank"] == 2
    assert requests
    assert all("ProjectionExpression" in request for request in requests)
    assert all(requested_attributes(request) <= allowed for request in requests), requests


def test_the_query_functions_point_reads_of_a_rolling_window_are_what_its_policy_allows(dynamodb: Any) -> None:
    import entity_rank
    import rolling_window
    from boards import Board, Boards
    from entity_rank import RankRequest
    from index_reads import IndexSchema, Layout
    from query_kinds import parse_request
    from read_context import ReadContext
    from tests.unit.query.aggregates_on_moto import load_boards

    # given the query role's GetItem statement, and three days of 60 songs
    (statement,) = granting(policy_documents(TERRAFORM_MODULE), "query", "dynamodb:GetItem")
    allowed = set(statement["Condition"][("ForAllValues:StringEquals", "dynamodb:Attributes")])
    load_boards(
        dynamodb,
        {f"2018-01-1{day}": {f"song{n:02d}": 60 - (n + 7 * day) % 60 for n in range(60)} for day in range(3)},
        1,
    )
    requests: list[dict[str, Any]] = []
    dynamodb.meta.events.register("provide-client-params.dynamodb.GetItem", lambda params, **_: requests.append(params))
    # when the function merges the window, with and without around-me ranks
    request = parse_request(
        {"period": "day", "key": "2018-01-12", "last": 3, "limit": 10},
        IndexSchema(),
        Layout(1),
        Boards(("day",)),
    )
    window = rolling_window.answer(ReadContext(dynamodb, "test-downloads", IndexSchema(), Layout(1)), request)
    assert window["complete"]
    assert window["reads"]["getItems"] > 0
    around = RankRequest(Board("day", "2018-01-12"), "song22", around=2)
    entity_rank.answer(ReadContext(dynamodb, "test-downloads", IndexSchema(), Layout(1)), around)
    # then every GetItem names its attributes (a projection) and only allowed ones
    assert requests
    assert all("ProjectionExpression" in request for request in requests)
    assert all(requested_attributes(request) <= allowed for request in requests), requests


def test_the_aggregator_updates_only_what_an_aggregate_carries(
    dynamodb: Any, sqs_queue: tuple[Any, str], lambda_context: Any
) -> None:
    from tests.unit.aggregator.handler_on_moto import wire

    # given the aggregator role's UpdateItem statement on the table (the progress table has its own)
    (statement,) = [
        statement
        for statement in granting(policy_documents(TERRAFORM_MODULE), "aggregator", "dynamodb:UpdateItem")
        if statement["Resource"] == [TABLE_ARN]
    ]
    patterns = statement["Condition"][("ForAllValues:StringLike", "dynamodb:Attributes")]
    assert statement["Action"] == ["dynamodb:UpdateItem"]
    assert not DOWNLOAD_ONLY_ATTRIBUTES & set(patterns)
    # and the aggregator on moto, its writes to the table recorded (alone, and inside transactions)
    deployed = wire(dynamodb, *sqs_queue)
    writes: list[dict[str, Any]] = []
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem", lambda params, **_: writes.append(params)
    )
    dynamodb.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: writes.extend(item["Update"] for item in params["TransactItems"] if "Update" in item),
    )
    # when it counts downloads of two songs in two windows
    for first in (0, 3):
        deployed.write("song1", 3, first=first)
        deployed.write("song2", 1, first=first)
        deployed.invoke(deployed.window_event(deployed.stream_records(), final=True), lambda_context)
    # and, while a repair's band is open on song1 (fence and deadline ahead), holds its next downloads
    ahead = int(time.time()) + 600
    dynamodb.update_item(
        TableName="test-downloads",
        Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}},
        UpdateExpression="SET RecountedThrough = :fence, RecountBand = :band",
        ExpressionAttributeValues={":fence": {"N": str(ahead)}, ":band": {"S": f"token|{ahead + 300}"}},
    )
    deployed.write("song1", 2, first=6)
    deployed.invoke(deployed.window_event(deployed.stream_records(), final=True), lambda_context)
    held = dynamodb.get_item(TableName="test-downloads", Key={"songID": {"S": "song1"}, "SK": {"S": "2018-01"}})
    assert len(held["Item"]["RecountHeld"]["SS"]) == 2
    # then every attribute its writes to the table name is one the policy lets it write
    on_table = [write for write in writes if write["TableName"] == "test-downloads"]
    assert on_table
    named = set().union(*(requested_attributes(write) for write in on_table))
    assert all(any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns) for name in named), named


def test_every_use_of_the_customer_key_goes_through_the_service_that_needs_it() -> None:
    documents = policy_documents(TERRAFORM_MODULE)
    expected = {
        ("aggregator", "UseTheCustomerKey"): ({VIA_DYNAMODB, VIA_SQS}, [KMS_KEY_ARN]),
        ("aggregator", "DecryptTheSourceTable"): ({VIA_DYNAMODB}, [SOURCE_TABLE_KMS_KEY_ARN]),
        ("query", "UseTheCustomerKey"): ({VIA_DYNAMODB}, [KMS_KEY_ARN]),
    }
    uses = {
        (role, statement["Sid"]): statement
        for role in ("aggregator", "query")
        for statement in documents[role]
        if any(action.startswith("kms:") for action in statement["Action"])
    }
    # then each role's key statements are these, each naming the services through which it may use its key, no other
    assert set(uses) == set(expected)
    for name, (services, keys) in expected.items():
        assert set(uses[name]["Condition"][("StringEquals", "kms:ViaService")]) == services, name
        assert uses[name]["Resource"] == keys, name


def test_every_role_policy_is_a_rendered_document_and_no_managed_policy_is_attached() -> None:
    text = "\n".join(path.read_text() for path in TERRAFORM_MODULE.glob("*.tf"))
    assert "aws_iam_role_policy_attachment" not in text
    assert "managed_policy_arns" not in text
    for policy in re.findall(r"^\s*(?:assume_role_)?policy\s*=\s*(.+)$", text, flags=re.MULTILINE):
        assert re.fullmatch(r"data\.aws_iam_policy_document\.[a-z_]+\[0\]\.json", policy.strip()), policy


@pytest.mark.parametrize(
    ("original", "injected", "expected"),
    [
        (
            "resources = [local.aggregates_table_arn]",
            'resources = ["*"]',
            "UpdateAggregates: ['dynamodb:UpdateItem'] on *",
        ),
        (
            "resources = [local.aggregates_table_arn]",
            'resources = ["arn:aws:dynamodb:*:*:table/*"]',
            "on arn:aws:dynamodb:*:*:table/*",
        ),
        ('["dynamodb:ListStreams"]', '["dynamodb:ListStreams", "dynamodb:GetRecords"]', "on *"),
        ("values   = local.aggregate_attributes", 'values   = ["*"]', "dynamodb:Attributes *"),
    ],
)
def test_an_injected_wildcard_is_found(original: str, injected: str, expected: str, tmp_path: Path) -> None:
    # given a copy of the module whose aggregator may update any table, read data on "*", or write any attribute
    for path in TERRAFORM_MODULE.glob("*.tf"):
        (tmp_path / path.name).write_text(path.read_text())
    iam = tmp_path / "iam.tf"
    text = iam.read_text()
    anchor = text.index('sid       = "UpdateAggregates"') if "ListStreams" not in original else 0
    position = text.index(original, anchor)
    iam.write_text(text[:position] + injected + text[position + len(original) :])
    # then the check names it
    found = wildcards(tmp_path)
    assert any(item.endswith(expected) for item in found), found
