"""Page tokens: where a listing stands in each of its board's partitions, as flat base64url text.

A token holds positions and nothing else, for one board and one partition layout; reading one back
accepts only the exact shape encode_token issues. A token of a range (by rank, by count) or of a
board's size also holds its scope: the kind of request it continues, the range it was issued for,
and the numbers the next answer starts from (the rank of its first entry, the entries counted). With
a rank policy the kind names it (`page.dense`) and the scope ends with the walk's state (rank_policies.py).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from index_reads import START, Layout, Position
from leaderboard_core.buckets import is_bucket_key
from request_parsing import MAX_ENTITY_ID_BYTES, InvalidRequest

_TOKEN = re.compile(r"\A[A-Za-z0-9_-]+\Z")
_CURSOR = re.compile(r"\A(?P<partition>[^=|]+)=(?:(?P<order>-?[0-9]{1,38}):(?P<entity>[A-Za-z0-9_-]+))?\Z")
_ORDER_DIGITS = 38
"""Digits of the longest order DynamoDB holds; a negative sum's order has a sign too."""
TOKEN_VERSION = 2
NO_PREVIOUS_LAYOUT = "-"
SCOPE_MARK = "~"
"""A scope's field starts with it: no partition name does (a board id starts with its bucket key)."""
_SCOPE = re.compile(
    r"\A~(?P<kind>[a-z]{1,12}(?:\.[a-z]{1,12})?)(?P<values>(?::(?:-?[0-9]{1,40}(?:\.[0-9]{1,40})?)?){0,6})\Z"
)
_MAX_SCOPE_LENGTH = 1 + 25 + 6 * (1 + 1 + 40 + 1 + 40)
"""The longest scope _SCOPE accepts: its kind (with a rank policy's) and six numbers of 40 digits and 40 decimals,
signed."""


@dataclass(frozen=True)
class Scope:
    """What a token of a range or a size continues: its kind, and numbers ("" for none) in the kind's order."""

    kind: str
    values: tuple[str, ...]

    def text(self) -> str:
        return SCOPE_MARK + ":".join((self.kind, *self.values))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _b64_length(size: int) -> int:
    return -(-size * 4 // 3)


def encode_token(board: str, layout: Layout, cursors: Mapping[str, Position | None], scope: Scope | None = None) -> str:
    """Flat text, base64url: version, board, layout, then per partition `partition=` or `partition=order:base64url(id)`,
    then the scope if any (`~kind:number:...`).

    Ids travel as base64url of their UTF-8 bytes, so any id DynamoDB holds fits the same alphabet and
    a bounded length, and reading a token back needs no recursive parser.
    """
    fields = [str(TOKEN_VERSION), board, str(layout.shards), _layout_field(layout.previous_shards)]
    for partition, cursor in sorted(cursors.items()):
        position = "" if cursor is None else f"{cursor.order}:{_b64(cursor.entity_id.encode())}"
        fields.append(f"{partition}={position}")
    if scope is not None:
        fields.append(scope.text())
    return _b64("|".join(fields).encode())


def _layout_field(previous_shards: int | None) -> str:
    return NO_PREVIOUS_LAYOUT if previous_shards is None else str(previous_shards)


def max_token_length(layout: Layout, board: str) -> int:
    """The longest token encode_token can issue for this board and layout: every partition at a 2,048-byte id."""
    partitions = layout.partitions(board)
    header = len(f"{TOKEN_VERSION}|{board}|{layout.shards}|{_layout_field(layout.previous_shards)}")
    cursor = len("|=:-") + _ORDER_DIGITS + _b64_length(MAX_ENTITY_ID_BYTES)
    scope = len("|") + _MAX_SCOPE_LENGTH
    return _b64_length(header + sum(len(partition) + cursor for partition in partitions) + scope)


def decode_token(token: Any, board: str, layout: Layout) -> dict[str, Position | None]:
    """The positions of a page's token: one of the exact shape this function issues, for this board and layout,
    and of a page (a token of a range or a size continues only its own kind of request)."""
    cursors, scope = decode_scoped_token(token, board, layout)
    if scope is not None:
        raise InvalidRequest(ANOTHER_POLICY if _base(scope.kind) == "page" else ANOTHER_KIND)
    return cursors


FORGED = "next_token is not a token issued by this function"
ANOTHER_KIND = "next_token was issued for another kind of request (a page, a range, a size): give it to that request"
ANOTHER_POLICY = "next_token was issued with another rankPolicy (or none): ask with the rankPolicy it was issued with"


def _base(kind: str) -> str:
    """A scope's kind without its rank policy: `page.dense` is a page's."""
    return kind.split(".")[0]


def decode_scope(
    token: Any, board: str, layout: Layout, kind: str, values: int
) -> tuple[dict[str, Position | None], tuple[str, ...]]:
    """The positions and the scope's numbers of a token issued for a request of this kind (`values` numbers)."""
    cursors, scope = decode_scoped_token(token, board, layout)
    if scope is not None and scope.kind != kind and _base(scope.kind) == _base(kind):
        raise InvalidRequest(ANOTHER_POLICY)
    if scope is None and _base(kind) == "page":
        raise InvalidRequest(ANOTHER_POLICY)
    if scope is None or scope.kind != kind or len(scope.values) != values:
        raise InvalidRequest(ANOTHER_KIND)
    return cursors, scope.values


def decode_scoped_token(token: Any, board: str, layout: Layout) -> tuple[dict[str, Position | None], Scope | None]:
    """Accept only a token of the exact shape this function issues, for this board and this partition layout.

    A token holds positions (and a scope's numbers) and nothing else, so a well-formed but invented one
    can at most start the listing at another place of the same board (and, for a range by rank, number
    its entries from another rank). Parsed by splitting and anchored patterns, in time and memory linear
    in its bounded length.
    """
    forged = InvalidRequest(FORGED)
    if not isinstance(token, str) or len(token) > max_token_length(layout, board) or not _TOKEN.match(token):
        raise forged
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise forged from None
    parts = text.split("|")
    if len(parts) < 5 or parts[0] != str(TOKEN_VERSION):
        raise forged
    _, token_board, shards, previous, *fields = parts
    scope = None
    if fields[-1].startswith(SCOPE_MARK):
        scoped = _SCOPE.match(fields.pop())
        if scoped is None or not fields:
            raise forged
        scope = Scope(scoped["kind"], tuple(scoped["values"].split(":")[1:]))
    if token_board != board:
        kind = "month" if is_bucket_key("month", board) else "leaderboard"
        raise InvalidRequest(f"next_token belongs to another {kind}")
    if [shards, previous] != [str(layout.shards), _layout_field(layout.previous_shards)]:
        raise InvalidRequest("next_token was issued for another leaderboard layout; start the listing again")
    partitions = set(layout.partitions(board))
    result: dict[str, Position | None] = {}
    for field in fields:
        match = _CURSOR.match(field)
        if match is None or match["partition"] not in partitions or match["partition"] in result:
            raise forged
        if match["order"] is None:
            result[match["partition"]] = START
            continue
        entity_id = _entity_of(match["entity"])
        if entity_id is None:
            raise forged
        result[match["partition"]] = Position(int(match["order"]), entity_id)
    return result, scope


def _entity_of(encoded: str) -> str | None:
    """The id a cursor names, if it is one DynamoDB could hold: valid UTF-8 of 1 to MAX_ENTITY_ID_BYTES bytes."""
    if len(encoded) > _b64_length(MAX_ENTITY_ID_BYTES):
        return None
    try:
        raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        return raw.decode() if 1 <= len(raw) <= MAX_ENTITY_ID_BYTES else None
    except ValueError:
        return None
