"""What IAM decides for one request under a list of identity-based policy statements: the rules of the IAM User
Guide, for the string conditions the module's policies use. The emulators ignore IAM conditions; this is the proof.

Statements are IAM JSON: {"Effect", "Action", "Resource", "Condition": {operator: {key: value(s)}}}. A request is an
action, a resource ARN and its request context: each context key maps to a string (single-valued key) or a tuple of
strings (multivalued key, possibly empty); a key the request does not carry is absent. The rules, with where the IAM
User Guide says them:

- Decision ("Policy evaluation logic"): "By default, all requests are implicitly denied"; "An explicit allow in an
  identity-based or resource-based policy overrides this default"; "An explicit deny in any policy overrides any
  allows". Only identity-based statements: no resource policy, boundary, SCP or session policy.
- Action ("IAM JSON policy elements: Action"): "The prefix and the action name are case insensitive"; "You can also
  use wildcards (*) as part of the action name".
- Resource ("IAM JSON policy elements: Resource"): "You can use wildcard characters (* and ?) within any ARN segment
  (the parts separated by colons). An asterisk (*) represents any combination of characters and a question mark (?)
  represents any single character"; "*" alone is every resource. The sixth segment is the resource part, colons and
  all (a log group's "log-group:/aws/lambda/x:*"); a pattern of fewer segments is refused (AWS documents none).
- Condition block ("Conditions with multiple context keys or values"): operators AND, keys of one operator AND, values
  of one key OR; of a negated operator, NOR.
- A key the request lacks ("IAM JSON policy elements: Condition operators"): "If the key that you specify in a policy
  condition is not present in the request context, the values do not match and the condition is false. If the policy
  condition requires that the key is not matched, such as StringNotLike or ArnNotLike, and the right key is not
  present, the condition is true." With ...IfExists: "If the policy key is present in the context of the request,
  process the key as specified in the policy. If the key is not present, evaluate the condition element as true."
  Null: "true (the key doesn't exist — it is null) or false (the key exists and its value is not null)".
- Strings (the same page): StringEquals "Exact matching, case sensitive"; StringEqualsIgnoreCase ignores case;
  StringLike "Case-sensitive matching. The values can include multi-character match wildcards (*) and
  single-character match wildcards (?) anywhere in the string" (a "*" crosses colons: "With a StringLike condition,
  the match succeeds"); StringNotEquals, StringNotLike and the IgnoreCase negation are their negations.
- Set operators ("Creating a condition that tests multiple key values"): ForAnyValue "The condition returns true if
  any one of the key values in the request matches any one of the condition values in the policy"; ForAllValues "The
  condition returns true if there's a match between every one of the specified key values in the request and at
  least one value in the policy"; "If the key values in the request resolve to an empty data set (for example, an
  empty string), a condition operator modified by ForAllValues returns true, and a condition operator modified by
  ForAnyValue returns false". A key the request lacks is such an empty set: "The ForAllValues set operator also
  returns true if there are no context keys in the request" ("Multivalued context key examples"). A multivalued key
  needs a set operator ("Multivalued context keys require a condition set operator", "Single-valued vs. multivalued
  context keys"): a plain operator on one is refused here, as ...IfExists under a set operator is (AWS documents no
  result for that pair).

Anything else (NotAction, NotResource, Numeric*, Date*, Arn*, Bool) raises: whoever needs it adds it, with its rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ContextValue = str | tuple[str, ...]
Decision = Literal["Allow", "ExplicitDeny", "ImplicitDeny"]

_STRING_TESTS = {
    "StringEquals": (False, lambda value, pattern: value == pattern),
    "StringNotEquals": (True, lambda value, pattern: value == pattern),
    "StringEqualsIgnoreCase": (False, lambda value, pattern: value.casefold() == pattern.casefold()),
    "StringNotEqualsIgnoreCase": (True, lambda value, pattern: value.casefold() == pattern.casefold()),
    "StringLike": (False, lambda value, pattern: _glob(pattern).fullmatch(value) is not None),
    "StringNotLike": (True, lambda value, pattern: _glob(pattern).fullmatch(value) is not None),
}
"""Operator -> (negated, whether a request value matches one policy value)."""


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)


def decide(statements: Iterable[Mapping[str, Any]], request: Request) -> Decision:
    """An explicit deny if a Deny statement applies, else Allow if an Allow statement does, else the implicit deny."""
    applying = [statement for statement in statements if applies(statement, request)]
    if any(_effect(statement) == "Deny" for statement in applying):
        return "ExplicitDeny"
    return "Allow" if applying else "ImplicitDeny"


def applies(statement: Mapping[str, Any], request: Request) -> bool:
    """The statement names the action and the resource, and its condition block holds for the request's context."""
    for unsupported in ("NotAction", "NotResource", "NotPrincipal"):
        if unsupported in statement:
            raise NotImplementedError(f"{unsupported} is not evaluated here")
    return (
        any(action_matches(pattern, request.action) for pattern in _listed(statement["Action"]))
        and any(resource_matches(pattern, request.resource) for pattern in _listed(statement["Resource"]))
        and condition_block_holds(statement.get("Condition", {}), request.context)
    )


def action_matches(pattern: str, action: str) -> bool:
    return _glob(pattern, ignore_case=True).fullmatch(action) is not None


def resource_matches(pattern: str, arn: str) -> bool:
    """ "*", or segment by segment: wildcards stay within a segment, the resource part is the sixth and last."""
    if pattern == "*":
        return True
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    if len(wanted) != 6:
        raise NotImplementedError(f"{pattern}: a resource of fewer than six ARN segments is not evaluated here")
    return len(actual) == 6 and all(
        _glob(segment).fullmatch(part) is not None for segment, part in zip(wanted, actual, strict=True)
    )


def condition_block_holds(block: Mapping[str, Mapping[str, Any]], context: Mapping[str, ContextValue]) -> bool:
    return all(
        condition_holds(operator, key, _listed(values), context)
        for operator, keys in block.items()
        for key, values in keys.items()
    )


def condition_holds(operator: str, key: str, values: Sequence[str], context: Mapping[str, ContextValue]) -> bool:
    """One operator on one key, its policy values ORed (NORed when negated), against the request context."""
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    present = key in context
    if base == "Null":
        if qualifier or if_exists:
            raise ValueError(f"{operator}: Null takes neither a set operator nor IfExists")
        (wanted,) = values
        carried = present and context[key] not in ("", ())
        return {"true": not carried, "false": carried}[wanted]
    if base not in _STRING_TESTS:
        raise NotImplementedError(f"condition operator {operator} is not evaluated here")
    negated, match = _STRING_TESTS[base]

    def one(value: str) -> bool:
        hit = any(match(value, pattern) for pattern in values)
        return not hit if negated else hit

    if qualifier:
        if if_exists:
            raise NotImplementedError(f"{operator}: AWS documents no result for IfExists under a set operator")
        carried = context.get(key, ())
        request_values = (carried,) if isinstance(carried, str) else carried
        if qualifier == "ForAllValues":
            return all(one(value) for value in request_values)
        if qualifier == "ForAnyValue":
            return any(one(value) for value in request_values)
        raise ValueError(f"unknown set operator {qualifier}")
    if not present:
        return if_exists or negated
    value = context[key]
    if not isinstance(value, str):
        raise ValueError(f"{operator} on {key}: a multivalued context key needs ForAllValues or ForAnyValue")
    return one(value)


def _effect(statement: Mapping[str, Any]) -> str:
    effect = statement.get("Effect", "Allow")
    if effect not in ("Allow", "Deny"):
        raise ValueError(f"unknown effect {effect}")
    return str(effect)


def _listed(value: str | Sequence[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _glob(pattern: str, ignore_case: bool = False) -> re.Pattern[str]:
    """IAM's wildcards: * any characters (none included), ? exactly one; nothing else is special."""
    translated = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(translated, re.DOTALL | (re.IGNORECASE if ignore_case else 0))
