"""No wildcard resource in the functions' policies: the one documented exception is X-Ray.

The policies are rendered from every `aws_iam_policy_document` of the module (static blocks and
`dynamic "statement"` blocks, each for_each value), with each reference replaced by the ARN it
has on AWS (REFERENCES). A reference the test does not know fails it: whoever adds one says what
it is. A rendered resource is a wildcard when it holds a "*", except:
- X-Ray's PutTraceSegments and PutTelemetryRecords, which have no resource-level permissions
  ("*" is the only resource they accept: Service Authorization Reference, AWS X-Ray);
- suffixes scoped under one named resource: this table's streams (the stream label changes when
  the stream is recreated) and the log streams of each function's own log group.
Every role policy must come from such a document, and no managed policy is attached.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import hcl2
import pytest

from leaderboard_tools.settings import TERRAFORM_MODULE

ACCOUNT, REGION = "123456789012", "us-east-1"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-downloads"
LOG_GROUPS = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda"
KMS_KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/11111111-2222-3333-4444-555555555555"
REFERENCES = {
    "local.table_arn": TABLE_ARN,
    "local.leaderboard_index_arn": f"{TABLE_ARN}/index/MonthDownloadsIndex",
    "aws_sqs_queue.failures[0].arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:app-aggregator-failures",
    "aws_dynamodb_table.progress[0].arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/app-progress",
    "aws_cloudwatch_log_group.aggregator[0].arn": f"{LOG_GROUPS}/app-aggregator",
    "aws_cloudwatch_log_group.query[0].arn": f"{LOG_GROUPS}/app-query",
}
DYNAMIC_VALUES = {"${var.kms_key_arn == null ? [] : [var.kms_key_arn]}": [KMS_KEY_ARN]}
UNSCOPED_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
SCOPED_SUFFIXES = [
    re.compile(rf"^{re.escape(TABLE_ARN)}/stream/\*$"),
    re.compile(rf"^arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/app-(aggregator|query):\*$"),
]


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


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document's statements, rendered: static ones, then each dynamic block per for_each value."""
    rendered = [render(statement, {}) for statement in document.get("statement", [])]
    for dynamic in document.get("dynamic", []):
        for label, body in dynamic.items():
            assert label.strip('"') == "statement", label
            values = DYNAMIC_VALUES.get(body["for_each"])
            assert values is not None, f"unknown for_each of a dynamic statement: {body['for_each']}"
            for value in values:
                rendered += [render(content, {"statement.value": value}) for content in body["content"]]
    return rendered


def render(statement: dict[str, Any], extra: dict[str, str]) -> dict[str, Any]:
    assert "not_resources" not in statement, "NotResource grants everything else: not allowed"
    return {
        "Sid": literal(statement.get("sid", '"(no sid)"'), extra),
        "Action": [literal(action, extra) for action in statement.get("actions", [])],
        "Resource": [literal(resource, extra) for resource in statement.get("resources", [])],
    }


def policy_documents(module: Path) -> dict[str, list[dict[str, Any]]]:
    documents = {}
    for path in sorted(module.glob("*.tf")):
        with path.open() as handle:
            parsed = hcl2.load(handle)
        for block in parsed.get("data", []):
            for kind, bodies in block.items():
                if kind.strip('"') == "aws_iam_policy_document":
                    for name, body in bodies.items():
                        documents[name.strip('"')] = statements(body)
    return documents


def wildcard_resources(module: Path) -> list[str]:
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
    return found


def test_the_policies_name_no_wildcard_resource() -> None:
    documents = policy_documents(TERRAFORM_MODULE)
    # the rendering found the functions' policies, with their ARNs in place
    assert {"aggregator", "query", "tracing", "lambda_assume_role"} <= set(documents)
    assert any(KMS_KEY_ARN in statement["Resource"] for statement in documents["aggregator"])
    assert wildcard_resources(TERRAFORM_MODULE) == []


def test_every_role_policy_is_a_rendered_document_and_no_managed_policy_is_attached() -> None:
    text = "\n".join(path.read_text() for path in TERRAFORM_MODULE.glob("*.tf"))
    assert "aws_iam_role_policy_attachment" not in text
    assert "managed_policy_arns" not in text
    for policy in re.findall(r"^\s*(?:assume_role_)?policy\s*=\s*(.+)$", text, flags=re.MULTILINE):
        assert re.fullmatch(r"data\.aws_iam_policy_document\.[a-z_]+\[0\]\.json", policy.strip()), policy


@pytest.mark.parametrize(
    ("injected", "expected"),
    [
        ('resources = ["*"]', "UpdateAggregates: ['dynamodb:UpdateItem', 'dynamodb:GetItem'] on *"),
        ('resources = ["arn:aws:dynamodb:*:*:table/*"]', "on arn:aws:dynamodb:*:*:table/*"),
    ],
)
def test_an_injected_wildcard_is_found(injected: str, expected: str, tmp_path: Path) -> None:
    # given a copy of the module whose aggregator may update any table
    for path in TERRAFORM_MODULE.glob("*.tf"):
        (tmp_path / path.name).write_text(path.read_text())
    iam = tmp_path / "iam.tf"
    original = 'actions   = ["dynamodb:UpdateItem", "dynamodb:GetItem"]\n    resources = [local.table_arn]'
    assert original in iam.read_text()
    iam.write_text(iam.read_text().replace(original, original.replace("resources = [local.table_arn]", injected)))
    # then the check names it
    assert any(found.endswith(expected) for found in wildcard_resources(tmp_path)), wildcard_resources(tmp_path)
