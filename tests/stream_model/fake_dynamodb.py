"""An in-memory DynamoDB client for the stream model: GetItem, PutItem, UpdateItem, DeleteItem and TransactWriteItems.

The model runs thousands of histories with hundreds of writes each; moto takes a millisecond
a call, this takes microseconds. `tests/unit/stream_model/test_fake_dynamodb.py` holds it to moto's
answers on the same requests, so what the model proves holds for the real expressions.
It can also misbehave as DynamoDB may from the caller's side: stop at a given call (the
function was killed), throttle, or apply a write while reporting a timeout (the response
was lost; the write landed anyway, now or later). Every change of an item is reported to
`on_change`, which the model turns into the table's stream records.
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


class Killed(BaseException):
    """The function's process is gone: no further call of this invocation reaches AWS.

    A BaseException, so that no `except Exception` in the code under test can swallow it:
    the process simply stops where the call was made.
    """


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
            token_name = self._take()
            name = self._names[token_name] if token_name.startswith("#") else token_name
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


Key = tuple[str, tuple[tuple[str, str], ...]]
ChangeListener = Callable[[str, Item, Item | None, Item | None], None]
"""(table, key, old item or None, new item or None) after every change that happened."""


@dataclass
class FakeDynamoDB:
    """Items keyed by (table, key); each call happens whole or not at all, as DynamoDB's writes and transactions."""

    items: dict[Key, Item] = field(default_factory=dict)
    writes: int = 0
    """Write calls that reached the table (UpdateItem, PutItem, TransactWriteItems), conditional failures included."""
    before_call: Callable[[str, dict[str, Any]], None] | None = None
    """Called with the operation and its parameters before each call: the model's clock, kills and interleavings."""
    on_change: ChangeListener | None = None
    lose_response: Callable[[dict[str, Any]], bool] | None = None
    """Decides, per write, to apply it but raise a read timeout, as a response lost on the way back."""
    delay_write: Callable[[dict[str, Any]], bool] | None = None
    """Decides, per write, to hold it back (raising a timeout now) until `land_delayed` applies it."""
    delayed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    throttle: Callable[[dict[str, Any]], bool] | None = None
    """Decides, per write (or per action of a transaction), that DynamoDB refuses it for capacity."""
    landed_late: int = 0
    _lock: threading.RLock = field(default_factory=threading.RLock)

    @staticmethod
    def _key(table: str, key: dict[str, Any]) -> Key:
        return table, tuple(sorted((name, value["S"]) for name, value in key.items()))

    def _call(self, operation: str, parameters: dict[str, Any]) -> None:
        if self.before_call is not None:
            self.before_call(operation, parameters)

    # ------------------------------------------------------------------ reads

    def get_item(self, **parameters: Any) -> dict[str, Any]:
        self._call("GetItem", parameters)
        item = self.items.get(self._key(parameters["TableName"], parameters["Key"]))
        return {"Item": _copy(item)} if item is not None else {}

    # ------------------------------------------------------------------ writes

    def update_item(self, **parameters: Any) -> dict[str, Any]:
        return self._write("UpdateItem", parameters)

    def put_item(self, **parameters: Any) -> dict[str, Any]:
        return self._write("PutItem", parameters)

    def delete_item(self, **parameters: Any) -> dict[str, Any]:
        return self._write("DeleteItem", parameters)

    def transact_write_items(self, **parameters: Any) -> dict[str, Any]:
        return self._write("TransactWriteItems", parameters)

    def _write(self, operation: str, parameters: dict[str, Any]) -> dict[str, Any]:
        self._call(operation, parameters)
        if operation == "TransactWriteItems":
            _validate_transaction(parameters)
        throttled = self._throttled(operation, parameters)
        if throttled is not None:
            raise throttled
        if self.delay_write is not None and self.delay_write(parameters):
            self.delayed.append((operation, parameters))
            raise ReadTimeoutError(endpoint_url="fake://dynamodb")
        response = self._apply(operation, parameters)
        if self.lose_response is not None and self.lose_response(parameters):
            raise ReadTimeoutError(endpoint_url="fake://dynamodb")
        return response

    def _throttled(self, operation: str, parameters: dict[str, Any]) -> ClientError | None:
        if self.throttle is None:
            return None
        if operation != "TransactWriteItems":
            return _error("ProvisionedThroughputExceededException", operation) if self.throttle(parameters) else None
        actions = [_action(entry)[1] for entry in parameters["TransactItems"]]
        codes = ["ThrottlingError" if self.throttle(action) else "None" for action in actions]
        if all(code == "None" for code in codes):
            return None
        return _cancelled([{"Code": code} if code == "None" else {"Code": code, "Message": code} for code in codes])

    def land_delayed(self, choose: Callable[[int], int] | None = None) -> int:
        """Apply held-back writes (all, or one chosen by index); their callers gave up on them long ago."""
        landed = 0
        while self.delayed:
            operation, parameters = self.delayed.pop(choose(len(self.delayed)) if choose else 0)
            with contextlib.suppress(ClientError):
                self._apply(operation, parameters)
            landed += 1
            self.landed_late += 1
            if choose:
                break
        return landed

    def _apply(self, operation: str, parameters: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.writes += 1
            if operation == "TransactWriteItems":
                return self._transact(parameters)
            if operation == "PutItem":
                return self._put(parameters)
            if operation == "DeleteItem":
                return self._delete(parameters)
            return self._update(parameters)

    def _condition_holds(self, parameters: dict[str, Any]) -> tuple[bool, Item | None]:
        """Whether the action's condition holds, and the item as it is (None when absent)."""
        condition = parameters.get("ConditionExpression")
        existing = self.items.get(self._key(parameters["TableName"], _key_of(parameters)))
        if not condition:
            return True, existing
        names = parameters.get("ExpressionAttributeNames", {})
        values = parameters.get("ExpressionAttributeValues", {})
        return _Condition(condition, names, values).evaluate(existing if existing is not None else {}), existing

    def _update(self, parameters: dict[str, Any]) -> dict[str, Any]:
        holds, existing = self._condition_holds(parameters)
        if not holds:
            old = existing if parameters.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            raise _error("ConditionalCheckFailedException", "UpdateItem", old)
        updated = self._updated_item(parameters)
        if parameters.get("ReturnValues") == "ALL_NEW":
            return {"Attributes": _copy(updated)}
        return {}

    def _updated_item(self, parameters: dict[str, Any]) -> Item:
        storage_key = self._key(parameters["TableName"], parameters["Key"])
        existing = self.items.get(storage_key)
        updated = _copy(existing) if existing is not None else _copy(parameters["Key"])
        _apply_update(
            updated,
            parameters["UpdateExpression"],
            parameters.get("ExpressionAttributeNames", {}),
            parameters.get("ExpressionAttributeValues", {}),
        )
        self._store(parameters["TableName"], storage_key, parameters["Key"], existing, updated)
        return updated

    def _put(self, parameters: dict[str, Any]) -> dict[str, Any]:
        holds, existing = self._condition_holds(parameters)
        if not holds:
            old = existing if parameters.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            raise _error("ConditionalCheckFailedException", "PutItem", old)
        item = _copy(parameters["Item"])
        key = _key_of(parameters)
        storage_key = self._key(parameters["TableName"], key)
        self._store(parameters["TableName"], storage_key, key, self.items.get(storage_key), item)
        return {}

    def _delete(self, parameters: dict[str, Any]) -> dict[str, Any]:
        holds, existing = self._condition_holds(parameters)
        if not holds:
            raise _error("ConditionalCheckFailedException", "DeleteItem")
        storage_key = self._key(parameters["TableName"], parameters["Key"])
        if existing is not None:
            del self.items[storage_key]
            if self.on_change is not None:
                self.on_change(parameters["TableName"], _copy(parameters["Key"]), _copy(existing), None)
        return {}

    def _transact(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """All conditions are evaluated against the items as they are; then every action applies, or none."""
        actions = [_action(entry) for entry in parameters["TransactItems"]]
        reasons: list[dict[str, Any]] = []
        for _kind, action in actions:
            holds, existing = self._condition_holds(action)
            if holds:
                reasons.append({"Code": "None"})
                continue
            reason: dict[str, Any] = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
            if existing is not None and action.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
                reason["Item"] = _copy(existing)
            reasons.append(reason)
        if any(reason["Code"] != "None" for reason in reasons):
            raise _cancelled(reasons)
        for kind, action in actions:
            if kind == "Update":
                self._updated_item(action)
            elif kind == "Put":
                self._put(action)
            elif kind == "Delete":
                self._delete(action)
        return {}

    def _store(self, table: str, storage_key: Key, key: Item, old: Item | None, new: Item) -> None:
        self.items[storage_key] = new
        if self.on_change is not None:
            self.on_change(table, _copy(key), _copy(old) if old is not None else None, _copy(new))

    def count_of(
        self, table: str, entity: str, period: str, schema: tuple[str, str, str] = ("songID", "SK", "DownloadCount")
    ) -> int:
        item = self.items.get(self._key(table, {schema[0]: {"S": entity}, schema[1]: {"S": period}}))
        return int(item[schema[2]]["N"]) if item and schema[2] in item else 0


_KEY_NAMES = ("songID", "SK", "ShardKey", "ClaimKey")
"""Key attributes of the model's tables (main: songID, SK; progress: ShardKey; claims or ledger: ClaimKey): a PutItem
names its key this way."""


def _key_of(parameters: dict[str, Any]) -> Item:
    if "Key" in parameters:
        return parameters["Key"]
    return {name: value for name, value in parameters["Item"].items() if name in _KEY_NAMES}


def _action(entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ((kind, action),) = entry.items()
    if kind not in ("Update", "ConditionCheck", "Put", "Delete"):
        raise ValueError(f"the fake does not implement {kind} in a transaction")
    return kind, action


def _validate_transaction(parameters: dict[str, Any]) -> None:
    """As DynamoDB: 1 to 100 actions, no two on the same item."""
    entries = parameters.get("TransactItems") or []
    if not 1 <= len(entries) <= 100:
        raise _error("ValidationException", "TransactWriteItems")
    targets = [FakeDynamoDB._key(action["TableName"], _key_of(action)) for _kind, action in map(_action, entries)]
    if len(set(targets)) != len(targets):
        raise _error("ValidationException", "TransactWriteItems")


def _cancelled(reasons: list[dict[str, Any]]) -> ClientError:
    codes = ", ".join(reason["Code"] for reason in reasons)
    message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]"
    response: dict[str, Any] = {
        "Error": {"Code": "TransactionCanceledException", "Message": message},
        "Message": message,
        "CancellationReasons": reasons,
    }
    return ClientError(response, "TransactWriteItems")  # type: ignore[arg-type]
