"""An in-memory DynamoDB client for the stream model: the subset of GetItem and UpdateItem the aggregators use.

The model runs thousands of histories with hundreds of writes each; moto takes a millisecond
a call, this takes microseconds. `tests/unit/test_fake_dynamodb.py` holds it to moto's
answers on the same requests, so what the model proves holds for the real expressions.
It can also misbehave as DynamoDB may from the caller's side: stop applying writes at a
given point (the function was killed) or apply a write while reporting a timeout (the
response was lost; the write landed anyway, now or later).
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

Item = dict[str, dict[str, Any]]

_TOKEN = re.compile(r"\s*(?:(<=|>=|<>|[=<>(),+-])|([#:]?[A-Za-z_][A-Za-z0-9_]*))")


class Killed(Exception):
    """The function's process is gone: no further call of this invocation reaches DynamoDB."""


@functools.lru_cache(maxsize=256)
def _tokens(text: str) -> tuple[str, ...]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            if text[position:].strip() == "":
                break
            raise ValueError(f"cannot tokenize {text[position:]!r}")
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    return tuple(tokens)


def _value_key(value: dict[str, Any]) -> tuple[int, Any]:
    if "N" in value:
        return (0, Decimal(value["N"]))
    if "S" in value:
        return (1, value["S"].encode())
    raise ValueError(f"unsupported attribute value {value!r}")


class _Condition:
    def __init__(self, text: str, names: dict[str, str], values: dict[str, Any]) -> None:
        self._tokens = _tokens(text)
        self._position = 0
        self._names = names
        self._values = values

    def _peek(self) -> str | None:
        return self._tokens[self._position] if self._position < len(self._tokens) else None

    def _take(self, expected: str | None = None) -> str:
        token = self._tokens[self._position]
        if expected is not None and token.upper() != expected:
            raise ValueError(f"expected {expected}, got {token}")
        self._position += 1
        return token

    def evaluate(self, item: Item) -> bool:
        result = self._or(item)
        if self._peek() is not None:
            raise ValueError(f"trailing tokens from {self._peek()}")
        return result

    def _or(self, item: Item) -> bool:
        result = self._and(item)
        while (self._peek() or "").upper() == "OR":
            self._take()
            right = self._and(item)
            result = result or right
        return result

    def _and(self, item: Item) -> bool:
        result = self._unary(item)
        while (self._peek() or "").upper() == "AND":
            self._take()
            right = self._unary(item)
            result = result and right
        return result

    def _unary(self, item: Item) -> bool:
        if (self._peek() or "").upper() == "NOT":
            self._take()
            return not self._unary(item)
        if self._peek() == "(":
            self._take("(")
            result = self._or(item)
            self._take(")")
            return result
        token = self._peek() or ""
        if token in ("attribute_exists", "attribute_not_exists"):
            self._take()
            self._take("(")
            name = self._names[self._take()]
            self._take(")")
            return (name in item) == (token == "attribute_exists")
        left = self._operand(item)
        operator = self._take()
        right = self._operand(item)
        if left is None or right is None:
            return operator == "<>" and (left is None) != (right is None)
        if operator == "=":
            return left == right
        if operator == "<>":
            return left != right
        if _value_key(left)[0] != _value_key(right)[0]:
            return False
        comparisons: dict[str, Callable[[Any, Any], bool]] = {
            "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b,
            ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b,
        }
        return comparisons[operator](_value_key(left)[1], _value_key(right)[1])

    def _operand(self, item: Item) -> dict[str, Any] | None:
        token = self._take()
        if token.startswith(":"):
            return self._values[token]
        return item.get(self._names[token] if token.startswith("#") else token)


def _apply_update(item: Item, text: str, names: dict[str, str], values: dict[str, Any]) -> None:
    """SET (a value, or if_not_exists(path, value), optionally plus or minus a value), ADD and REMOVE.

    As in DynamoDB, every operand is read from the item as it was before the update.
    """
    tokens = _tokens(text)
    old = _copy(item)
    position = 0

    def name_of(token: str) -> str:
        return names[token] if token.startswith("#") else token

    def operand() -> dict[str, Any] | None:
        nonlocal position
        token = tokens[position]
        if token == "if_not_exists":
            path = name_of(tokens[position + 2])
            position += 4
            fallback = operand()
            if tokens[position] != ")":
                raise ValueError("if_not_exists needs ')'")
            position += 1
            return old.get(path, fallback)
        position += 1
        return values[token] if token.startswith(":") else old.get(name_of(token))

    changes: list[tuple[str, dict[str, Any] | None]] = []
    action = None
    while position < len(tokens):
        token = tokens[position]
        if token.upper() in ("SET", "ADD", "REMOVE"):
            action = token.upper()
            position += 1
            continue
        if token == ",":
            position += 1
            continue
        name = name_of(token)
        if action == "SET":
            if tokens[position + 1] != "=":
                raise ValueError(f"SET {name} needs '='")
            position += 2
            value = operand()
            if position < len(tokens) and tokens[position] in ("+", "-"):
                sign = 1 if tokens[position] == "+" else -1
                position += 1
                other = operand()
                if value is None or other is None:
                    raise _error("ValidationException", "UpdateItem")
                value = {"N": _number(NUMBERS.add(Decimal(value["N"]), NUMBERS.multiply(sign, Decimal(other["N"]))))}
            changes.append((name, dict(value) if value is not None else None))
        elif action == "ADD":
            addition = values[tokens[position + 1]]
            current = old.get(name, {"N": "0"})
            changes.append((name, {"N": _number(NUMBERS.add(Decimal(current["N"]), Decimal(addition["N"])))}))
            position += 2
        elif action == "REMOVE":
            changes.append((name, None))
            position += 1
        else:
            raise ValueError(f"no action before {token}")
    for name, value in changes:
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value


NUMBERS = decimal.Context(prec=38)
"""DynamoDB's numbers: 38 significant digits (Python's default context keeps 28)."""


def _number(value: Decimal) -> str:
    """As DynamoDB answers them: integers without an exponent."""
    return str(int(value)) if value == value.to_integral_value() else str(value.normalize(NUMBERS))


def _copy(item: Item) -> Item:
    """Attribute values here are flat ({"S": ...} or {"N": ...}): two levels are the whole item."""
    return {name: dict(value) for name, value in item.items()}


def _error(code: str, operation: str, item: Item | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": code}}
    if item is not None:
        response["Item"] = _copy(item)
    return ClientError(response, operation)  # type: ignore[arg-type]


@dataclass
class FakeDynamoDB:
    """Items keyed by (table, key); each call either happens whole or not at all, as DynamoDB's single-item writes."""

    items: dict[tuple[str, tuple[tuple[str, str], ...]], Item] = field(default_factory=dict)
    writes: int = 0
    """UpdateItem calls that reached the table, conditional failures included."""
    kill_after_writes: int | None = None
    """When set, the write that would make `writes` exceed it raises Killed and is not applied."""
    lose_response: Callable[[dict[str, Any]], bool] | None = None
    """Decides, per update, to apply it but raise a read timeout, as a response lost on the way back."""
    delay_write: Callable[[dict[str, Any]], bool] | None = None
    """Decides, per update, to hold it back (raising a timeout now) until `land_delayed` applies it."""
    delayed: list[dict[str, Any]] = field(default_factory=list)
    throttle: Callable[[dict[str, Any]], bool] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def _key(table: str, key: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
        return table, tuple(sorted((name, value["S"]) for name, value in key.items()))

    def get_item(self, TableName: str, Key: dict[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803
        item = self.items.get(self._key(TableName, Key))
        return {"Item": _copy(item)} if item is not None else {}

    def update_item(self, **parameters: Any) -> dict[str, Any]:
        if self.kill_after_writes is not None and self.writes >= self.kill_after_writes:
            raise Killed("the invocation was killed before this write")
        if self.throttle is not None and self.throttle(parameters):
            raise _error("ProvisionedThroughputExceededException", "UpdateItem")
        if self.delay_write is not None and self.delay_write(parameters):
            self.delayed.append(parameters)
            raise ReadTimeoutError(endpoint_url="fake://dynamodb")
        response = self._update(parameters)
        if self.lose_response is not None and self.lose_response(parameters):
            raise ReadTimeoutError(endpoint_url="fake://dynamodb")
        return response

    def land_delayed(self, choose: Callable[[int], int] | None = None) -> int:
        """Apply held-back writes (all, or one chosen by index); their callers gave up on them long ago."""
        landed = 0
        while self.delayed:
            parameters = self.delayed.pop(choose(len(self.delayed)) if choose else 0)
            with contextlib.suppress(ClientError):
                self._update(parameters)
            landed += 1
            if choose:
                break
        return landed

    def _update(self, parameters: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self._update_atomically(parameters)

    def _update_atomically(self, parameters: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        names = parameters.get("ExpressionAttributeNames", {})
        values = parameters.get("ExpressionAttributeValues", {})
        storage_key = self._key(parameters["TableName"], parameters["Key"])
        existing = self.items.get(storage_key)
        current: Item = _copy(existing) if existing is not None else {}
        condition = parameters.get("ConditionExpression")
        if condition and not _Condition(condition, names, values).evaluate(current):
            old = existing if parameters.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            raise _error("ConditionalCheckFailedException", "UpdateItem", old)
        updated = current if existing is not None else _copy(parameters["Key"])
        _apply_update(updated, parameters["UpdateExpression"], names, values)
        self.items[storage_key] = updated
        if parameters.get("ReturnValues") == "ALL_NEW":
            return {"Attributes": _copy(updated)}
        return {}

    def count_of(
        self, table: str, entity: str, period: str, schema: tuple[str, str, str] = ("songID", "SK", "DownloadCount")
    ) -> int:
        item = self.items.get(self._key(table, {schema[0]: {"S": entity}, schema[1]: {"S": period}}))
        return int(item[schema[2]]["N"]) if item and schema[2] in item else 0
