"""Claims: which of the two counters of a download counts it, while a backfill counts a table's history.

The aggregator counts what the stream delivers; `leaderboard-tools backfill` counts what a scan of the table finds.
A download written while both run may be met by both, in either order, any number of times (retries, a killed
backfill run again). Whichever claims it first counts it: one conditional write per download in the claims table,
which the other's claim then finds. A claim is never released: the backfill's is written in the same transaction
as the counts it adds, the aggregator's before its counts (a crash between them leaves the claim, and the retry
counts the download as its own).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leaderboard_core.source_items import download_identity

CLAIMS_TABLE_VARIABLE = "CLAIMS_TABLE_NAME"
CLAIM_KEY = "ClaimKey"
"""The claims table's partition key: `download#<identity of the whole primary key>`, or a backfill's own items."""
CLAIM_OWNER = "Owner"
STREAM = "stream"
BACKFILL = "backfill"
BACKFILL_ITEM_PREFIX = "backfill#"
"""The backfill's own items in the claims table: its start, each scan segment's place, its end."""
BACKFILL_DONE = BACKFILL_ITEM_PREFIX + "done"
"""Written when a backfill has counted the whole table: until then `reconcile --repair` refuses."""

FIRST_WRITE = "FirstWrite"
"""Watermark mode with claims: the eventID of the first stream record the stream claimed the download for; an INSERT
of the key that finds another one is the key written again after a deletion."""
FIRST_REMOVAL = "FirstRemoval"
"""Watermark mode with claims: the eventID of a REMOVE of the key the stream read before any INSERT of it. The key
existed before its first INSERT the stream claimed, so what a backfill counted of it is an earlier write."""
LEDGER_VARIABLE = "LEDGER"
"""The aggregator's environment: "true" in ledger mode, where the claims table is kept for good as the ledger."""
STREAM_FROM = "StreamFrom"
"""Ledger mode: the first record of a download the stream applied, `<stream label>|<shard id>|<padded sequence>`;
set once, never changed."""
BASE_ENTITY = "Entity"
"""On a download the backfill counted: the entity it counted it for."""
BASE_CONTRIBUTION = "Contribution"
"""On a download the backfill counted: what it added, board id -> amount. Ledger mode moves the count from there;
watermark mode leaves to the backfill only an INSERT that counts in exactly these boards."""


READ_AT = "ReadAt"
"""One reader per shard: on a ledger item the backfill or the rebase wrote from the table's item (its version
`backfill~<n>` or `<record>~<n>`), DynamoDB's clock when that item was read: the Date header of the response that
returned it, in epoch seconds. The item existed then, so its removal came after it; a keep of the version bounds its
taker by it (`READ_FROM`, `READ_UNTIL`)."""
READ_FROM_THE_TABLE = "~"
"""In a version label, what a rebase (`<record>~<n>`) or the backfill (`backfill~<n>`) wrote from the table's item: the
INSERT of the item read may have a record after the label's record, so such a version is placed against the records of
its key by the read's time (`ReadFrom`, `ReadUntil`), not by sequence alone."""
READ_FROM = "ReadFrom"
READ_UNTIL = "ReadUntil"
"""On an operator's keep of a version with `ReadAt`: `ReadAt` less and plus the repair's clock margin (epoch seconds).
A record of the key created (`ApproximateCreationDateTime`) after `ReadUntil` was written after the read, one created
before `ReadFrom` before it; one between may be either."""
KEPT_MAYBE_UNTIL = "KeptMaybeUntil"
"""On an operator's keep with `ReadFrom`: the lowest INSERT of the key after the kept version created between
`ReadFrom` and `ReadUntil`: the read item's own INSERT or a new item's, not told apart. An expiry above it that takes
the keep is reported (`keep_taken_unsure`)."""

DOWNLOAD_KEY = "DownloadKey"
"""A download's ledger item: its primary key as the table holds it (a map), so that the rebase can read the item again
before it takes the key back, and name the download in what it reports."""


def stored_key(key: Mapping[str, Any]) -> dict[str, Any]:
    """`DownloadKey`'s value for a key (a stream record's Keys, a scanned item's key): a binary value, base64 text in a
    Lambda event, bytes from a client, is stored as the bytes the table holds."""
    attributes = {}
    for name, value in key.items():
        binary = value.get("B") if isinstance(value, Mapping) else None
        attributes[name] = {"B": base64.b64decode(binary)} if isinstance(binary, str) else value
    return {"M": attributes}


def download_key_of(ledger_item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The download's primary key a ledger item keeps, or None for one written before it kept it."""
    key = (ledger_item.get(DOWNLOAD_KEY) or {}).get("M")
    return dict(key) if key else None


def claim_key(key: Mapping[str, Any]) -> str:
    """A download's claim, from every attribute of its primary key (a stream record's Keys, a scanned item's key)."""
    return "download#" + download_identity(key, entity="")


def stream_claim(table: str, key: Mapping[str, Any], record: str | None = None) -> dict[str, Any]:
    """The aggregator's claim: an UpdateItem that sets the owner only if none is set, and returns the owner. With
    `record` (the stream record's eventID), FirstWrite is set to it where none is: a later write of the same key (an
    INSERT after a deletion) then finds a claim that names another record, and is reported, not counted twice.

    With `record`, a claim the stream owns that names no first write (nor a removal) fails its condition: it was made
    without FirstWrite, so which write of the key it counted is unknown (`stream_claims.UNKNOWN_FIRST_WRITE`)."""
    request: dict[str, Any] = {
        "TableName": table,
        "Key": {CLAIM_KEY: {"S": claim_key(key)}},
        "UpdateExpression": "SET #owner = if_not_exists(#owner, :stream)",
        "ExpressionAttributeNames": {"#owner": CLAIM_OWNER},
        "ExpressionAttributeValues": {":stream": {"S": STREAM}},
        "ReturnValues": "ALL_NEW",
    }
    if record is not None:
        request["UpdateExpression"] += ", #from = if_not_exists(#from, :record)"
        request["ConditionExpression"] = (
            "attribute_not_exists(#owner) OR #owner <> :stream OR attribute_exists(#from) OR attribute_exists(#removal)"
        )
        request["ExpressionAttributeNames"] |= {"#from": FIRST_WRITE, "#removal": FIRST_REMOVAL}
        request["ExpressionAttributeValues"][":record"] = {"S": record}
    return request


def removal_claim(table: str, key: Mapping[str, Any], record: str) -> dict[str, Any]:
    """The aggregator's claim of a REMOVE (`record`, its eventID) read before any INSERT of the key was claimed:
    FirstRemoval is set where none is, and the owner where none is (the item is gone: a backfill has nothing left to
    count). Its condition holds only while no INSERT of the key is claimed, and not on a claim the stream owns without
    FirstWrite; failing it, the claim is left as it is."""
    return {
        "TableName": table,
        "Key": {CLAIM_KEY: {"S": claim_key(key)}},
        "UpdateExpression": "SET #owner = if_not_exists(#owner, :stream), #removal = if_not_exists(#removal, :record)",
        "ConditionExpression": (
            "attribute_not_exists(#from) "
            "AND (attribute_not_exists(#owner) OR #owner <> :stream OR attribute_exists(#removal))"
        ),
        "ExpressionAttributeNames": {"#owner": CLAIM_OWNER, "#from": FIRST_WRITE, "#removal": FIRST_REMOVAL},
        "ExpressionAttributeValues": {":stream": {"S": STREAM}, ":record": {"S": record}},
    }


def first_record_of(response: Mapping[str, Any]) -> str | None:
    """The record a claim was first made for (FirstWrite), from the UpdateItem's answer; None where none is recorded."""
    return ((response.get("Attributes") or {}).get(FIRST_WRITE) or {}).get("S")


def first_removal_of(response: Mapping[str, Any]) -> str | None:
    """The REMOVE the stream read of a key before any INSERT of it (FirstRemoval), from the UpdateItem's answer."""
    return ((response.get("Attributes") or {}).get(FIRST_REMOVAL) or {}).get("S")


def owner_of(response: Mapping[str, Any]) -> str | None:
    """Who owns a claim, from the UpdateItem's answer."""
    return ((response.get("Attributes") or {}).get(CLAIM_OWNER) or {}).get("S")


def backfill_counted(response: Mapping[str, Any]) -> frozenset[tuple[str, str]] | None:
    """What the backfill's claim says it counted, as (entity, board) pairs, from the claim's answer; None where the
    claim records no entity or no boards (a claim of the stream, or one written by a backfill that recorded neither)."""
    entry = ledger_entry(response)
    if entry.base_entity is None or not entry.base:
        return None
    return frozenset((entry.base_entity, board) for board in entry.base)


def backfill_claim(
    table: str,
    key: Mapping[str, Any],
    entity: str | None = None,
    contribution: Mapping[str, int | Decimal] | None = None,
    read_at: int | None = None,
) -> dict[str, Any]:
    """The backfill's claim, a transaction's Put: written only where nobody has claimed the download. It also records
    what the backfill counts (`entity`, board id -> amount): in ledger mode the Base the stream's first record of the
    download moves from, so a later edit or deletion takes back exactly that; in watermark mode what an INSERT the
    backfill owns must count in to be the write it counted. With what it counts goes the download's key
    (`DownloadKey`)."""
    item: dict[str, Any] = {CLAIM_KEY: {"S": claim_key(key)}, CLAIM_OWNER: {"S": BACKFILL}}
    if entity is not None:
        item[BASE_ENTITY] = {"S": entity}
    if contribution is not None:
        item[BASE_CONTRIBUTION] = {"M": {board: {"N": str(amount)} for board, amount in contribution.items()}}
        item[DOWNLOAD_KEY] = stored_key(key)
    if read_at is not None:
        item[READ_AT] = {"N": str(read_at)}
    return {
        "Put": {
            "TableName": table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#key)",
            "ExpressionAttributeNames": {"#key": CLAIM_KEY},
        }
    }


def stream_from(stream_label: str, shard_id: str, padded_sequence: str) -> str:
    """StreamFrom's value for one stream record: where in the stream's order the download's ledger begins."""
    return f"{stream_label}|{shard_id}|{padded_sequence}"


def ledger_claim(table: str, key: Mapping[str, Any], first_record: str) -> dict[str, Any]:
    """The aggregator's ledger claim for one download in one step: the owner and StreamFrom (`first_record`, the
    step's first record of the download, from `stream_from`) each set only where none is, and the item returned
    whole (ReturnValues ALL_NEW), so that every reader of any record learns the same two facts, written once."""
    return {
        "TableName": table,
        "Key": {CLAIM_KEY: {"S": claim_key(key)}},
        "UpdateExpression": "SET #owner = if_not_exists(#owner, :stream), #from = if_not_exists(#from, :first)",
        "ExpressionAttributeNames": {"#owner": CLAIM_OWNER, "#from": STREAM_FROM},
        "ExpressionAttributeValues": {":stream": {"S": STREAM}, ":first": {"S": first_record}},
        "ReturnValues": "ALL_NEW",
    }


@dataclass(frozen=True)
class LedgerEntry:
    """A download's ledger item, read: who counted it first, the first stream record applied, and the Base."""

    owner: str | None
    stream_label: str | None
    shard_id: str | None
    sequence: str | None
    """Padded: StreamFrom's record, compared only with records of its own shard."""
    base_entity: str | None = None
    base: dict[str, int | Decimal] = field(default_factory=dict)
    """Board id -> what the backfill counted there; empty when the stream owns the download."""


def ledger_entry(response: Mapping[str, Any]) -> LedgerEntry:
    """The ledger item from the claim's answer; parts it does not hold (or cannot be read) are None."""
    item = response.get("Attributes") or {}
    parts = ((item.get(STREAM_FROM) or {}).get("S") or "").split("|")
    label, shard_id, sequence = parts if len(parts) == 3 and all(parts) else (None, None, None)
    base: dict[str, int | Decimal] = {}
    for board, value in ((item.get(BASE_CONTRIBUTION) or {}).get("M") or {}).items():
        if isinstance(value, Mapping) and isinstance(value.get("N"), str):
            amount = Decimal(value["N"])
            base[board] = int(amount) if amount == amount.to_integral_value() else amount.normalize()
    return LedgerEntry(
        owner=(item.get(CLAIM_OWNER) or {}).get("S"),
        stream_label=label,
        shard_id=shard_id,
        sequence=sequence,
        base_entity=(item.get(BASE_ENTITY) or {}).get("S"),
        base=base,
    )


REBASES = "Rebases"
"""One reader per shard: on a ledger item with no Version (the backfill's), how many times the rebase moved it. Every
write of such an item sets Version (the handler) or raises Rebases (the rebase), so a condition on both as read holds
only while the item is the one read, whatever its other attributes hold by value."""


def rebases_condition(ledger_item: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """A condition that a ledger item with no Version was moved by no rebase since it was read (`ledger_item`)."""
    if REBASES not in ledger_item:
        return "attribute_not_exists(#rebases)", {"#rebases": REBASES}, {}
    return "#rebases = :rebases", {"#rebases": REBASES}, {":rebases": ledger_item[REBASES]}


def rebased_count(ledger_item: Mapping[str, Any]) -> dict[str, str]:
    """Rebases after one more move by the rebase."""
    return {"N": str(int((ledger_item.get(REBASES) or {}).get("N", "0")) + 1)}


EXPIRY_PREFIX = "expired#"
"""An expiry's own ledger item: `expired#<claim key>|<version>`, written once, so its old image is kept once."""
EXPIRY_KEPT = "ExpiryKept"
"""One reader per shard: on a ledger item the operator named expired (its REMOVE by TTL reported gone, thought
trimmed), the versions the ledger counted when each such keep moved the key to nothing (a string set; a string in
items written before). Every later move carries it: the expiry of a kept version, applied in any order, finds its keep
by it (`expired#<claim key>|<version>|kept`)."""
KEPT_BY = "KeptBy"
"""On an operator's keep item: the version of the removal that took it, set once."""
KEPT_BY_EXPIRY = "KeptByExpiry"
"""On an operator's keep item (or a gone report it is written from): whether the removal that took it (`KeptBy`) was an
expiry by TTL, which then kept its old image in place of the keep's."""
KEPT_BY_DELETION = "KeptByDeletion"
"""On an operator's keep item (or written from a gone report): the removal that took it (`KeptBy`) is a deletion that
took the kept count back with it. A keep an earlier version let a removal with no TTL identity take lacks it: that
taking left the count in place, so giving it back adds nothing (expiry_keeps.py `retake`)."""
KEPT_UNTIL = "KeptUntil"
"""On an operator's keep item of version L: the lowest version of an INSERT of the key after L applied (a new item under
the key). The removal of L came before it, so only a removal below it may take the keep."""
BACKFILLED = "backfill~"
"""The label of a keep of a ledger item with no Version (the backfill's): every record follows it."""
FOLLOWS = "Follows"
"""On an expiry's own item: the label (Version, or `backfill~<Rebases>`) of the key's last record applied when the
expiry was, if the expiry follows it. Only then may it be that version's removal (the first REMOVE after it, S2)."""
UNORDERED = "Unordered"
"""On an expiry's own item kept for a key whose records were refused for their order (no known lineage joins their
shard to its Version's: a pause cut it): the label of the key's Version then. Whether the expiry ended that version,
nothing in the tables says: a rebase that finds the key gone says so beside its gone report."""
GONE_PREFIX = "gone#"
"""A gone report's own item, `gone#<claim key>|<label>`: the version the rebase found the key's item gone at, and what
it counted then; the operator's `--expired-keys` answers that version, no other."""
REFUSED = "Refused"
"""On a gone report: why the operator's `--expired-keys` answer to it was not applied (a report with no read window, or
a record of the key applied since). The report stays open, listed by every rebase and judged again on each answer."""
REFUSED_FOR = "RefusedFor"
"""Retired, read only: on a gone report an earlier version refused for a removal with no TTL identity, that taker.
Such a removal is a deletion, which keeps nothing: recover lists the report with what that means now, and an answer
to it is judged as any other (recover/gone_keys.py `retired_refusal`); nothing writes it any more."""
CLOSED = "Closed"
"""Retired, read only: on a gone report an earlier version's `--deleted-keys` closed while its taker (`RefusedFor`)
stood. Listed again by recover, said as right as it is while that taker stands, until named deleted again."""
UNSURE_FACT_PREFIX = "unsure#"
"""A `keep_taken_unsure` fact recover received: `unsure#<digest of claim key, taker, reason>`, written once (its
`FirstMessage`): a later copy, in any run, is told a repeat of it."""
GONE_AT = "GoneAt"
"""One reader per shard: on a ledger item, gone label -> the version of the key's expiry by TTL applied while the key
was at it (its `Follows`), or "" while none was. The rebase adds a label when it reports the key gone there; a record
of the key later found between the two (an INSERT or a REMOVE, S10) proves that expiry was not the version's removal."""
ANSWERS = "Answers"
"""On an expiry's own item: the gone label the operator's `--expired-keys` took it for (it followed that version with
its content), until a record between the two proves it was not that version's removal."""

REMOVED_BETWEEN = "RemovedBetween"
"""On an expiry's own item that `Answers` a gone version: the lowest REMOVE of the key read back between the two. It
may be that version's own removal (the first REMOVE after it, S10) until an INSERT below it is read back."""


def version_label(version: str | None, ledger_item: Mapping[str, Any] | None) -> str:
    """A ledger item's version as keeps and gone reports name it: its Version, or with none `backfill~<Rebases>`."""
    return version or f"{BACKFILLED}{((ledger_item or {}).get(REBASES) or {}).get('N') or 0}"


def read_without_window(label: str, gone_report: Mapping[str, Any]) -> bool:
    """A gone report of a version read from the table (`~` in its label) written before reports carried the read's
    window: recover refuses its 'expired', and the aggregator never lifts that refusal."""
    return READ_FROM_THE_TABLE in label and READ_FROM not in gone_report


def expiries_kept(ledger_item: Mapping[str, Any]) -> set[str]:
    """The versions a ledger item's `ExpiryKept` names."""
    value = ledger_item.get(EXPIRY_KEPT) or {}
    return set(value.get("SS", [])) | ({value["S"]} if "S" in value else set())


DECREASED = "Decreased"
"""One reader per shard: the aggregates a download key's moves took from, which may have reached 0 and must leave the
index. An entry is a board of the ledger item's own `Entity`, or an [entity, board] pair for another entity the key
counted for before."""


def decreased_of(ledger_item: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    """The aggregates (entity, board) a ledger item's `Decreased` names, its plain boards read against its `Entity`."""
    if not ledger_item:
        return set()
    entity = (ledger_item.get(BASE_ENTITY) or {}).get("S", "")
    found: set[tuple[str, str]] = set()
    for value in ledger_item.get(DECREASED, {}).get("L", []):
        if "S" in value:
            found.add((entity, value["S"]))
        elif len(pair := value.get("L", [])) == 2:
            found.add((pair[0]["S"], pair[1]["S"]))
    return found


def decreased_value(aggregates: Iterable[tuple[str, str]], entity: str) -> dict[str, Any]:
    """`Decreased` as written beside `Entity` = `entity`: its own boards plain, another entity's as pairs."""
    return {
        "L": [
            {"S": board} if counted == entity else {"L": [{"S": counted}, {"S": board}]}
            for counted, board in sorted(set(aggregates))
        ]
    }
