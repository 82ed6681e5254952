"""The page kind: a board's listing, `limit` entries at a time, from a page token on.

{"month": "2018-01", "limit": 10, "next_token": "..."}
    -> {"month": "2018-01", "items": [{"songID": "song3", "downloadCount": 12}, ...], "next_token": "..." | null}
A page reads the head of every partition of the board in parallel and merges them; the token
records, per partition, how far it has been consumed, so every page size and every number of
partitions give the same listing as one sorted list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boards import Board
from index_reads import (
    START,
    Entry,
    Layout,
    PartitionReader,
    Position,
)
from leaderboard_core.attributes import COUNT_FIELD
from page_tokens import FORGED, Scope, decode_scope, decode_token, encode_token
from rank_policies import TOP, RankState, parse_policy, ranked
from read_context import ReadContext
from request_parsing import InvalidRequest

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True)
class PageRequest:
    board: Board
    limit: int
    cursors: dict[str, Position | None]
    """The partitions still to read and where each stands; an exhausted partition is absent."""
    policy: str | None = None
    """The rank policy asked (rank_policies.py): each item then carries its rank under it."""
    state: RankState = TOP
    """With a policy: the listing's walk up to the cursors (its first page: the top)."""


def parse(event: dict[str, Any], board: Board, entity_field: str, layout: Layout) -> PageRequest:
    """The limit (DEFAULT_LIMIT if none) and where the token says each partition stands (its start if none)."""
    limit = parse_limit(event)
    policy = parse_policy(event)
    token = event.get("next_token")
    partitions = layout.partitions(board.id)
    if token is None:
        return PageRequest(board, limit, {partition: START for partition in partitions}, policy)
    if policy is None:
        return PageRequest(board, limit, decode_token(token, board.id, layout))
    cursors, values = decode_scope(token, board.id, layout, policy_scope(policy), 3)
    return PageRequest(board, limit, cursors, policy, RankState.of_scope(values, FORGED))


def policy_scope(policy: str) -> str:
    """The scope kind of a page's token under a rank policy."""
    return f"{SCOPE}.{policy}"


SCOPE = "page"


def parse_limit(event: dict[str, Any]) -> int:
    """A page's `limit`: 1 to MAX_LIMIT entries, DEFAULT_LIMIT if none."""
    limit = event.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def merge_page(
    request: PageRequest, read: PartitionReader, map_partitions: Callable[..., Any] = map
) -> tuple[list[Entry], dict[str, Position | None]]:
    """The next `limit` entries of the union of the partitions, and each partition's cursor after them.

    Each partition contributes its next `limit` entries at least: the page's entries are among
    them, whatever the spread. A partition whose every entry is consumed and which has no more
    leaves the cursors; an empty result means the listing is complete.
    """
    partitions = sorted(request.cursors)
    reads = list(map_partitions(lambda p: read(p, request.cursors[p], request.limit), partitions))
    heads = {partition: entries for partition, (entries, _) in zip(partitions, reads, strict=True)}
    exhausted = {partition for partition, (_, done) in zip(partitions, reads, strict=True) if done}
    tagged = heapq.merge(*([(entry, partition) for entry in entries] for partition, entries in heads.items()))
    page: list[Entry] = []
    seen: set[str] = set()
    cursors = dict(request.cursors)
    consumed = dict.fromkeys(partitions, 0)
    for entry, partition in tagged:
        if len(page) == request.limit:
            break
        consumed[partition] += 1
        cursors[partition] = Position(entry.order, entry.entity_id)
        if entry.entity_id in seen:
            continue  # moving between layouts, an aggregate can show in two partitions for a moment
        seen.add(entry.entity_id)
        page.append(entry)
    for partition in partitions:
        if partition in exhausted and consumed[partition] == len(heads[partition]):
            del cursors[partition]
    return page, cursors


def answer(reads: ReadContext, request: PageRequest) -> dict[str, Any]:
    """The next `limit` entries of the board, and the token of the page after them (null: the listing is complete)."""
    board = request.board.id
    entries, cursors = merge_page(request, reads.reader(reads.budget(board)), reads.map_partitions)
    if request.policy is None:
        return {
            **request.board.named(),
            "items": items_of(reads, entries),
            "next_token": encode_token(board, reads.layout, cursors) if cursors else None,
        }
    walked = ranked(request.policy, request.state, entries, reads.summed)
    scope = Scope(policy_scope(request.policy), walked[-1][2].scope() if walked else request.state.scope())
    return {
        **request.board.named(),
        "items": [item | {"rank": rank} for item, (_, rank, _) in zip(items_of(reads, entries), walked, strict=True)],
        "next_token": encode_token(board, reads.layout, cursors, scope) if cursors else None,
    }


def items_of(reads: ReadContext, entries: list[Entry]) -> list[dict[str, Any]]:
    """A listing's items: each entity and its value."""
    return [{reads.schema.entity: entry.entity_id, COUNT_FIELD: reads.value(entry.count)} for entry in entries]
