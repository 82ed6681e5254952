"""The IAM evaluator (iam_conditions.py) against the IAM User Guide's and the DynamoDB Developer Guide's own examples:
each policy as the page prints it (with the dynamodb: prefix the set-operator page leaves off its actions), each
request and result as the page states them, the page named on each test.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.terraform.iam_conditions import (
    Request,
    action_matches,
    condition_holds,
    decide,
    resource_matches,
)

THREAD = "arn:aws:dynamodb:REGION:ACCOUNT-ID-WITHOUT-HYPHENS:table/Thread"
GAME_SCORES = "arn:aws:dynamodb:us-west-2:123456789012:table/GameScores"


def test_a_key_the_request_lacks_fails_a_condition_unless_it_is_negated() -> None:
    # "If the key that you specify in a policy condition is not present in the request context, the values do not
    # match and the condition is false. If the policy condition requires that the key is not matched, such as
    # StringNotLike or ArnNotLike, and the right key is not present, the condition is true." (IAM JSON policy
    # elements: Condition operators)
    # given a request context without aws:PrincipalTag/job-category (the page's StringEquals example)
    context: dict[str, str] = {}
    # then StringEquals is false, StringNotLike true, and with the key present StringEquals is an exact match
    assert not condition_holds("StringEquals", "aws:PrincipalTag/job-category", ["iamuser-admin"], context)
    assert condition_holds("StringNotLike", "aws:PrincipalTag/job-category", ["iamuser-admin"], context)
    tagged = {"aws:PrincipalTag/job-category": "iamuser-admin"}
    assert condition_holds("StringEquals", "aws:PrincipalTag/job-category", ["iamuser-admin"], tagged)
    assert not condition_holds("StringEquals", "aws:PrincipalTag/job-category", ["IAMUser-Admin"], tagged)
    assert condition_holds("StringEqualsIgnoreCase", "aws:PrincipalTag/job-category", ["IAMUser-Admin"], tagged)


RUN_INSTANCE = {
    "Effect": "Allow",
    "Action": "ec2:RunInstances",
    "Resource": "*",
    "Condition": {"StringLikeIfExists": {"ec2:InstanceType": ["t1.*", "t2.*", "m3.*"]}},
}


@pytest.mark.parametrize(
    ("operator", "context", "expected"),
    [
        ("StringLike", {}, "ImplicitDeny"),
        ("StringLikeIfExists", {}, "Allow"),
        ("StringLikeIfExists", {"ec2:InstanceType": "t2.micro"}, "Allow"),
        ("StringLikeIfExists", {"ec2:InstanceType": "m4.large"}, "ImplicitDeny"),
    ],
    ids=["THISPOLICYDOESNOTWORK, no key", "IfExists, no key", "IfExists, t2.micro", "IfExists, m4.large"],
)
def test_if_exists_holds_where_the_key_is_missing_and_tests_it_where_present(
    operator: str, context: dict[str, str], expected: str
) -> None:
    # "If the policy key is present in the context of the request, process the key as specified in the policy. If the
    # key is not present, evaluate the condition element as true." Its example: RunInstances with StringLike on
    # ec2:InstanceType fails for the resources without the key ("THISPOLICYDOESNOTWORK"); StringLikeIfExists allows
    # them and tests the instance's type. (IAM JSON policy elements: Condition operators, "...IfExists")
    # given the page's statement with either operator, and a resource with or without an instance type
    statement = RUN_INSTANCE | {"Condition": {operator: RUN_INSTANCE["Condition"]["StringLikeIfExists"]}}
    # when IAM decides RunInstances on it
    decision = decide(
        [statement], Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:111122223333:image/ami-1", context)
    )
    # then the page's result
    assert decision == expected


def test_string_like_wildcards_cross_colons() -> None:
    # "With a StringLike condition, the match succeeds. The first asterisk matches
    # us-east-2:999999999999:store/abc:." (IAM JSON policy elements: Condition operators, ARN condition operators)
    context = {
        "aws:SourceArn": "arn:aws:someservice:us-east-2:999999999999:store/abc:111122223333:finance/document.txt"
    }
    # then the page's pattern matches as StringLike
    assert condition_holds("StringLike", "aws:SourceArn", ["arn:aws:someservice:*:111122223333:finance/*"], context)


READ_THREAD = {
    "Effect": "Allow",
    "Action": "dynamodb:GetItem",
    "Resource": THREAD,
    "Condition": {"ForAllValues:StringLike": {"dynamodb:requestedAttributes": ["PostDateTime", "Message", "Tags"]}},
}
NO_ID_UPDATES = {
    "Effect": "Deny",
    "Action": "dynamodb:PutItem",
    "Resource": THREAD,
    "Condition": {"ForAnyValue:StringLike": {"dynamodb:requestedAttributes": ["ID", "PostDateTime"]}},
}


@pytest.mark.parametrize(
    ("requested", "expected"),
    [(("PostDateTime", "Message"), "Allow"), (("PostDateTime", "UserName"), "ImplicitDeny")],
    ids=["PostDateTime and Message", "PostDateTime and UserName"],
)
def test_for_all_values_needs_every_requested_value_in_the_policy(requested: tuple[str, ...], expected: str) -> None:
    # "If the user makes a request to DynamoDB to get the attributes PostDateTime and Message from the Threads table,
    # the request is allowed"; "There's no match for UserName, so the condition operator returns false, and the policy
    # does not allow the request." (Creating a condition that tests multiple key values)
    request = Request("dynamodb:GetItem", THREAD, {"dynamodb:requestedAttributes": requested})
    assert decide([READ_THREAD], request) == expected


@pytest.mark.parametrize(
    ("requested", "expected"),
    [(("UserName", "Message", "PostDateTime"), "ExplicitDeny"), (("UserName",), "Allow")],
    ids=["UserName, Message and PostDateTime", "UserName alone"],
)
def test_for_any_value_under_deny_refuses_a_request_naming_one_forbidden_value(
    requested: tuple[str, ...], expected: str
) -> None:
    # "The last test returns true, so the condition is true; because the Effect element is set to Deny, the request is
    # denied"; "with just the UserName attribute ... The condition returns false, so the effect of the policy (Deny)
    # is also false, and the request is not denied by this policy" (Creating a condition that tests multiple key
    # values). Beside a statement allowing PutItem, "not denied" is allowed.
    allow_put = {"Effect": "Allow", "Action": "dynamodb:PutItem", "Resource": THREAD}
    request = Request("dynamodb:PutItem", THREAD, {"dynamodb:requestedAttributes": requested})
    assert decide([NO_ID_UPDATES, allow_put], request) == expected


@pytest.mark.parametrize(("qualifier", "expected"), [("ForAllValues", True), ("ForAnyValue", False)])
@pytest.mark.parametrize("context", [{}, {"dynamodb:requestedAttributes": ()}], ids=["key missing", "empty set"])
def test_set_operators_on_an_empty_or_missing_set(qualifier: str, expected: bool, context: dict[str, Any]) -> None:
    # "If the key values in the request resolve to an empty data set (for example, an empty string), a condition
    # operator modified by ForAllValues returns true, and a condition operator modified by ForAnyValue returns false"
    # (Creating a condition that tests multiple key values); "The ForAllValues set operator also returns true if there
    # are no context keys in the request" (Multivalued context key examples)
    holds = condition_holds(f"{qualifier}:StringLike", "dynamodb:requestedAttributes", ["ID"], context)
    assert holds is expected


DENY_RESTRICTED_TAGS = {
    "Sid": "DenyRestrictedTags",
    "Effect": "Deny",
    "Action": ["iam:Tag*", "iam:UnTag*"],
    "Resource": ["*"],
    "Condition": {"ForAllValues:StringNotLike": {"aws:TagKeys": "key1*"}},
}


@pytest.mark.parametrize(
    ("tag_keys", "matches"),
    [(("key1:legal",), False), (("key1:hr", "key1:personnel"), False), (("key2:audit",), True), (None, True)],
    ids=["key1:legal", "key1:hr and key1:personnel", "key2:audit", "no aws:TagKeys"],
)
def test_the_deny_restricted_tags_table(tag_keys: tuple[str, ...] | None, matches: bool) -> None:
    # The table under "Deny a single policy condition value for a multivalued context key": key1:legal "No match";
    # key1:hr, key1:personnel "No match"; key2:audit "Match"; "No aws:TagKeys in the request context" "Match"
    # (Multivalued context key examples). For a Deny statement, a match denies.
    context = {} if tag_keys is None else {"aws:TagKeys": tag_keys}
    decision = decide([DENY_RESTRICTED_TAGS], Request("iam:TagUser", "arn:aws:iam::111122223333:user/bob", context))
    assert (decision == "ExplicitDeny") is matches


def test_a_negated_operator_nors_its_values() -> None:
    # "If a single negated matching condition operator includes multiple values for a context key, those values are
    # evaluated using a logical NOR." (Conditions with multiple context keys or values)
    values = ["ID", "PostDateTime"]
    assert condition_holds("StringNotEquals", "dynamodb:Select", values, {"dynamodb:Select": "Message"})
    assert not condition_holds("StringNotEquals", "dynamodb:Select", values, {"dynamodb:Select": "PostDateTime"})


def test_null_tests_whether_the_key_is_there() -> None:
    # "use either true (the key doesn't exist — it is null) or false (the key exists and its value is not null)";
    # the example allows EC2 only without temporary credentials: {"Null": {"aws:TokenIssueTime": "true"}}
    # (IAM JSON policy elements: Condition operators, "Condition operator to check existence of condition keys")
    statement = {
        "Action": "ec2:*",
        "Effect": "Allow",
        "Resource": "*",
        "Condition": {"Null": {"aws:TokenIssueTime": "true"}},
    }
    with_keys = Request("ec2:DescribeInstances", "*", {"aws:TokenIssueTime": "2020-01-01T00:00:01Z"})
    assert decide([statement], Request("ec2:DescribeInstances", "*")) == "Allow"
    assert decide([statement], with_keys) == "ImplicitDeny"


LIMIT_ACCESS_TO_SPECIFIC_ATTRIBUTES = {
    "Sid": "LimitAccessToSpecificAttributes",
    "Effect": "Allow",
    "Action": ["dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:Scan"],
    "Resource": [GAME_SCORES],
    "Condition": {
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["UserId", "TopScore"]},
        "StringEqualsIfExists": {
            "dynamodb:Select": "SPECIFIC_ATTRIBUTES",
            "dynamodb:ReturnValues": ["NONE", "UPDATED_OLD", "UPDATED_NEW"],
        },
    },
}


@pytest.mark.parametrize(
    ("action", "context", "expected"),
    [
        ("dynamodb:GetItem", {"dynamodb:Attributes": ("UserId", "TopScore")}, "Allow"),
        ("dynamodb:Query", {"dynamodb:Attributes": ("UserId",), "dynamodb:Select": "SPECIFIC_ATTRIBUTES"}, "Allow"),
        ("dynamodb:Query", {"dynamodb:Attributes": ("UserId",), "dynamodb:Select": "ALL_ATTRIBUTES"}, "ImplicitDeny"),
        ("dynamodb:GetItem", {"dynamodb:Attributes": ("UserId", "Wins")}, "ImplicitDeny"),
        ("dynamodb:UpdateItem", {"dynamodb:Attributes": ("TopScore",), "dynamodb:ReturnValues": "NONE"}, "Allow"),
        (
            "dynamodb:UpdateItem",
            {"dynamodb:Attributes": ("TopScore",), "dynamodb:ReturnValues": "ALL_NEW"},
            "ImplicitDeny",
        ),
        ("dynamodb:PutItem", {"dynamodb:Attributes": ("TopScore",)}, "ImplicitDeny"),
    ],
    ids=[
        "GetItem of UserId and TopScore",
        "Query selecting SPECIFIC_ATTRIBUTES",
        "Query selecting ALL_ATTRIBUTES",
        "GetItem of Wins",
        "UpdateItem returning NONE",
        "UpdateItem returning ALL_NEW",
        "PutItem",
    ],
)
def test_the_developer_guides_attribute_limited_policy(action: str, context: dict[str, Any], expected: str) -> None:
    # Example 2, "Grant permissions that limit access to specific attributes in a table": "If the user specifies the
    # Select parameter, then its value must be SPECIFIC_ATTRIBUTES"; "If the user specifies the ReturnValues parameter,
    # then its value must be NONE, UPDATED_OLD, or UPDATED_NEW"; "This policy doesn't permit PutItem, DeleteItem, or
    # BatchWriteItem" (DynamoDB Developer Guide, Using IAM policy conditions for fine-grained access control)
    request = Request(action, GAME_SCORES, context)
    assert decide([LIMIT_ACCESS_TO_SPECIFIC_ATTRIBUTES], request) == expected


def test_an_explicit_deny_overrides_any_allow_and_nothing_allowed_is_denied() -> None:
    # "By default, all requests are implicitly denied"; "An explicit allow in an identity-based or resource-based
    # policy overrides this default"; "An explicit deny in any policy overrides any allows" (Policy evaluation logic)
    allow = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}
    deny = {"Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::bucket/*"}
    delete = Request("s3:DeleteObject", "arn:aws:s3:::bucket/key")
    assert decide([allow, deny], delete) == "ExplicitDeny"
    assert decide([allow, deny], Request("s3:GetObject", "arn:aws:s3:::bucket/key")) == "Allow"
    assert decide([deny], Request("s3:GetObject", "arn:aws:s3:::bucket/key")) == "ImplicitDeny"
    assert decide([], delete) == "ImplicitDeny"


@pytest.mark.parametrize(
    ("pattern", "action", "matches"),
    [
        ("iam:*AccessKey*", "iam:CreateAccessKey", True),
        ("iam:*AccessKey*", "iam:ListAccessKeys", True),
        ("iam:*AccessKey*", "iam:ChangePassword", False),
        ("s3:*", "s3:GetObject", True),
        ("iam:ListAccessKeys", "IAM:listaccesskeys", True),
        ("dynamodb:GetItem", "dynamodb:GetItems", False),
    ],
)
def test_actions_match_with_wildcards_and_without_case(pattern: str, action: str, matches: bool) -> None:
    # "You can also use wildcards (*) as part of the action name ... iam:*AccessKey* ... including CreateAccessKey,
    # DeleteAccessKey, ListAccessKeys, and UpdateAccessKey"; "The prefix and the action name are case insensitive. For
    # example, iam:ListAccessKeys is the same as IAM:listaccesskeys" (IAM JSON policy elements: Action)
    assert action_matches(pattern, action) is matches


@pytest.mark.parametrize(
    ("pattern", "arn", "matches"),
    [
        ("arn:aws:iam::123456789012:user/accounting/*", "arn:aws:iam::123456789012:user/accounting/bob", True),
        ("arn:aws:iam::123456789012:user/accounting/*", "arn:aws:iam::123456789012:user/sales/bob", False),
        ("arn:aws:s3:::my_corporate_bucket/*", "arn:aws:s3:::my_corporate_bucket/a/b.txt", True),
        ("arn:aws:dynamodb:*:*:table/Books", "arn:aws:dynamodb:us-east-2:123456789012:table/Books", True),
        ("arn:aws:dynamodb:*:*:table/Books", "arn:aws:dynamodb:us-east-2:123456789012:table/Books/index/I", False),
        ("arn:aws:dynamodb:us-east-?:*:table/Books", "arn:aws:dynamodb:us-east-2:123456789012:table/Books", True),
        ("arn:aws:dynamodb:us-east-?:*:table/Books", "arn:aws:dynamodb:us-east-12:123456789012:table/Books", False),
        (
            "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/app-query:*",
            "arn:aws:logs:us-east-1:123456789012:log-group:/aws/lambda/app-query:log-stream:2026/01/01",
            True,
        ),
        ("*", "arn:aws:dynamodb:us-east-2:123456789012:table/Books/stream/x", True),
    ],
)
def test_resources_match_segment_by_segment(pattern: str, arn: str, matches: bool) -> None:
    # "You can use wildcard characters (* and ?) within any ARN segment (the parts separated by colons). An asterisk
    # (*) represents any combination of characters and a question mark (?) represents any single character"; its
    # examples: user/accounting/*, my_corporate_bucket/* (IAM JSON policy elements: Resource)
    assert resource_matches(pattern, arn) is matches


def test_a_plain_operator_on_a_multivalued_key_is_refused() -> None:
    # "Multivalued context keys require a condition set operator" (Single-valued vs. multivalued context keys)
    with pytest.raises(ValueError, match="needs ForAllValues or ForAnyValue"):
        condition_holds("StringEquals", "dynamodb:Attributes", ["UserId"], {"dynamodb:Attributes": ("UserId",)})
