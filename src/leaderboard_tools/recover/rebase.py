"""The repair of ledger mode with one reader per shard (STREAM_READERS=1): each download key's ledger item moved to what
the table's item counts now (a rebase), by conditioned transactions like the aggregator's, instead of a recount. With
SUM_ATTRIBUTE a key counts its item's amount in each board, read as the aggregator reads it (`amount_of`), and its
ledger item's Contribution holds that amount, as the aggregator's does.

A recount writes the aggregates only; the key's next record would then move from a Contribution the recount never
touched. The rebase moves the ledger item and the aggregates together, key by key:

- a key with an item and no ledger item is counted as the ledger-mode backfill counts it (the ledger Put conditioned on
  its absence, and the aggregates' ADDs, all or nothing);
- a key whose ledger item counts C while its item counts N moves to N in one transaction: the ledger Put conditioned
  on the item as read (Version and Contribution), and the ADD of N - C per aggregate. Version keeps its record (a
  record after it still moves the key on from N; one at or before it stays ignored) and takes a suffix, `~<n>`, that
  orders nowhere between two records (the aggregator compares sequence numbers as padded strings: the record at
  Version is a prefix, so before it, and a later record differs within the padding, so after it): a transaction of
  the aggregator that read the key before the rebase then fails its condition and reads the key again;
- a ledger item that counts something with no item in the table is reported, never guessed: a deletion whose record
  was trimmed is taken back, an expiry stays counted (retention), and nothing left tells them apart. The operator, who
  knows which it was, names the deleted ones (`deleted`): those are taken back, by the same conditioned move to
  nothing; and the expired ones (`expired`): those move to nothing with their count kept, as the handler keeps an
  expiry's, so the key's next write no longer takes it back.

Every write is conditioned on what was read, the item read after its ledger item (a record applied meanwhile fails the
condition: the key is read again). Expiries' own items (`expired#...`) are left as they are. Each gone report keeps
the version it named in an item of its own (`gone#<claim key>|<version>`), which the operator's answer is to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.amounts import amount_of
from leaderboard_core.claims import (
    BASE_CONTRIBUTION,
    BASE_ENTITY,
    CLAIM_KEY,
    DECREASED,
    DOWNLOAD_KEY,
    READ_AT,
    REBASES,
    STREAM_FROM,
    backfill_claim,
    claim_key,
    decreased_of,
    decreased_value,
    rebased_count,
    stored_key,
)
from leaderboard_core.index_layout import FIRST_REACHED, ORDER_SCALE, leaderboard_partition, order_tiebreak
from leaderboard_tools.backfill.transactions import item_key
from leaderboard_tools.deployment import Deployment
from leaderboard_tools.reconcile.clock import CLOCK_MARGIN_SECONDS
from leaderboard_tools.reconcile.recount import boards_of_download
from leaderboard_tools.recover.gone_keys import GoneKeys
from leaderboard_tools.recover.ledger_scan import LedgerScan
from leaderboard_tools.recover.ledger_versions import (
    ATTEMPTS,
    VERSION,
    as_read,
    read_time,
    rebased_version,
    records_version,
    refresh_read,
)

Aggregate = tuple[str, str]


class RebaseRefused(RuntimeError):
    """The deployment is not one a rebase applies to: nothing was written."""


@dataclass
class RebaseReport:
    """What a rebase read and wrote, and what it left for the operator."""

    keys_read: int = 0
    in_step: int = 0
    counted: int = 0
    """Keys with no ledger item, counted as the backfill counts them."""
    moved: int = 0
    """Keys whose ledger item moved to what their item counts."""
    taken_back: int = 0
    """Keys reported gone before, named deleted by the operator, moved to nothing."""
    kept_expired: int = 0
    """Keys reported gone before, named expired by the operator: moved to nothing, their count kept (an expiry's)."""
    refusals_closed: int = 0
    """Gone reports whose 'expired' was refused (`Refused`), closed by naming the key deleted: nothing applied."""
    retries: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    """Items the aggregator rejects as it does (`rejected_download`: an entity too long to key an aggregate), counted
    nowhere: fix the item and its next record counts it."""
    gone: list[dict[str, Any]] = field(default_factory=list)
    """Ledger items that count something and whose item is not in the table (deleted or expired: not told apart)."""
    unplaced: list[dict[str, Any]] = field(default_factory=list)
    """Keys left as they are: a ledger item of two readers per shard, or one in conflict ATTEMPTS times; each names the
    aggregates ([entity, board]) its ledger item and its item count in."""

    @property
    def differences_remain(self) -> bool:
        return bool(self.gone or self.unplaced)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"differences_remain": self.differences_remain}


def rebase_refusal(deployment: Deployment) -> str | None:
    """Why this deployment's boards cannot be rebased (a plain recount is what they take), or None."""
    if not (deployment.ledger and deployment.one_stream_reader and deployment.claims_table):
        return "the rebase repairs ledger mode with one reader per shard (LEDGER=true, STREAM_READERS=1) only"
    if deployment.tie_break == FIRST_REACHED:
        return "the aggregator breaks ties by first_reached: the rebase moves counts without their downloads' instants"
    return None


def rebase(
    dynamodb: Any,
    deployment: Deployment,
    deleted: Collection[str] = (),
    expired: Collection[str] = (),
    clock_margin_seconds: float = CLOCK_MARGIN_SECONDS,
) -> RebaseReport:
    """Move every key's ledger item, and the aggregates with it, to what the table's item counts now; a key whose item
    is gone is reported, or taken back where the operator names its claim key among the `deleted`, or kept counted as
    an expiry is where it is among the `expired` (a keep of a version read from the table is bounded by that read's
    time, give or take `clock_margin_seconds`)."""
    refusal = rebase_refusal(deployment)
    if refusal is None and set(deleted) & set(expired):
        refusal = f"keys named both deleted and expired: {', '.join(sorted(set(deleted) & set(expired)))}"
    if refusal is not None:
        raise RebaseRefused(f"{refusal}; nothing was written")
    rebaser = Rebaser(dynamodb, deployment, frozenset(deleted), frozenset(expired), clock_margin_seconds)
    ledger = dict(rebaser.scans.ledger_items())
    both = rebaser.resolve_answers()
    if both:
        raise RebaseRefused(f"keys named both deleted and expired: {', '.join(sorted(both))}; nothing was written")
    seen: set[str] = set()
    for item in rebaser.scans.downloads():
        key = item_key(item, deployment)
        claim = claim_key(key)
        seen.add(claim)
        rebaser.report.keys_read += 1
        rebaser.check_rejected(claim, item)
        known = ledger.get(claim)
        in_step = known is not None and rebaser.state(known) == rebaser.counts(item)
        if in_step and READ_AT not in known and not records_version(known):
            rebaser.report.in_step += 1
            rebaser.settle_decreased(known)
            continue
        rebaser.rebase_key(claim, key)
    for claim in sorted(set(ledger) - seen):
        rebaser.settle_decreased(ledger[claim])
        if ledger[claim].get(BASE_CONTRIBUTION, {}).get("M"):
            rebaser.check_gone(claim, ledger[claim])
    rebaser.check_not_kept()
    return rebaser.report


class Rebaser(GoneKeys):
    """One rebase's reads and conditioned writes."""

    def __init__(
        self,
        dynamodb: Any,
        deployment: Deployment,
        deleted: frozenset[str] = frozenset(),
        expired: frozenset[str] = frozenset(),
        margin: float = CLOCK_MARGIN_SECONDS,
    ) -> None:
        assert deployment.claims_table is not None
        self.deleted, self.expired = deleted, expired
        self.margin, self.dynamodb = margin, dynamodb
        self.deployment = deployment
        self.claims = deployment.claims_table
        self.report = RebaseReport()
        self.scans = LedgerScan(dynamodb, deployment, self.claims, expired, self.version_counted)
        self.gone_reports = self.scans.gone_reports
        self.follows = self.scans.follows
        self.unordered = self.scans.unordered

    # ------------------------------------------------------------------ reading

    def _scan(self, **parameters: Any) -> Iterator[dict[str, Any]]:
        """A consistent scan's items, page by page (`LedgerScan.scan`)."""
        return self.scans.scan(**parameters)

    def counts(self, item: Mapping[str, Any] | None) -> tuple[str, dict[str, Decimal]]:
        """What an item counts, (entity, board -> amount), as the aggregator parses it: 1 per board, or with
        SUM_ATTRIBUTE its amount (`amount_of`, as the aggregator reads it); ("", {}) for no download, or a download
        the aggregator rejects (its amount missing or not summable)."""
        marker, summed = self.deployment.marker, self.deployment.sum_attribute
        if item is None or (marker is not None and not marker.marks(item)):
            return "", {}
        boards = boards_of_download(item, self.deployment)
        amount = amount_of(item.get(summed)) if summed else Decimal(1)
        if not boards or amount is None:
            return "", {}
        return item[self.deployment.names.entity]["S"], dict.fromkeys(boards, amount)

    @staticmethod
    def version_counted(item: Mapping[str, Any], label: str) -> tuple[str, str, frozenset[tuple[str, Decimal]]]:
        """A version's label (the item's attribute `label`, or its key's part after the claim key) and what was counted
        at it, as a gone report's item or an expiry's own item keeps them."""
        named = item[label]["S"] if label in item else item[CLAIM_KEY]["S"].partition("|")[2]
        counts = {(board, Decimal(value["N"])) for board, value in item.get(BASE_CONTRIBUTION, {}).get("M", {}).items()}
        return named, item.get(BASE_ENTITY, {}).get("S", ""), frozenset(counts)

    @staticmethod
    def state(ledger_item: Mapping[str, Any]) -> tuple[str, dict[str, Decimal]]:
        """What a ledger item counts, (entity, board -> amount)."""
        contribution = {
            board: Decimal(value["N"]) for board, value in ledger_item.get(BASE_CONTRIBUTION, {}).get("M", {}).items()
        }
        entity = ledger_item.get(BASE_ENTITY, {}).get("S", "") if contribution else ""
        return entity, contribution

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self.dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return item

    def _read_item(self, key: dict[str, Any]) -> tuple[dict[str, Any] | None, int | None]:
        """The table's item and, when there is one, DynamoDB's clock when it was read (`ReadAt` of what it moves to)."""
        response = self.dynamodb.get_item(TableName=self.deployment.table, Key=key, ConsistentRead=True)
        return response.get("Item"), read_time(response) if "Item" in response else None

    # ------------------------------------------------------------------ writing

    def rebase_key(self, claim: str, key: dict[str, Any], gone_checked: bool = False) -> None:
        """Read the ledger item, then the item, and move the one to the other; again when a record came between.
        `gone_checked`: the key's item was found again by `check_gone`."""
        for attempt in range(ATTEMPTS):
            self.report.retries += bool(attempt)
            ledger_item = self._get(self.claims, {CLAIM_KEY: {"S": claim}})
            item, read_at = self._read_item(key)
            if item is None and gone_checked:
                why = "its item was written and deleted again while the rebase ran: run the repair again"
                self._unplaced(claim, why, ledger_item)
                return
            if item is None:
                self.check_gone(claim, ledger_item)
                return
            entity, target = self.counts(item)
            if ledger_item is not None and STREAM_FROM in ledger_item and VERSION not in ledger_item:
                why = "a ledger item of two readers per shard (StreamFrom): recount it by hand"
                self._unplaced(claim, why, ledger_item, entity, target)
                return
            if ledger_item is None and not target:
                return
            if ledger_item is not None and self.state(ledger_item) == (entity, target):
                if READ_AT in ledger_item and not refresh_read(self.dynamodb, self.claims, ledger_item, read_at):
                    continue
                if records_version(ledger_item) and not self._commit(
                    claim, key, ledger_item, entity, target, {}, (), read_at
                ):
                    continue
                self.report.in_step += 1
                self.settle_decreased(ledger_item)
                return
            moves = self._moves(ledger_item, entity, target)
            if self._commit(claim, key, ledger_item, entity, target, moves, read_at=read_at):
                if ledger_item is None:
                    self.report.counted += 1
                else:
                    self.report.moved += 1
                self._leave_index(ledger_item, moves)
                return
        why = f"its ledger item changed under {ATTEMPTS} rebases: run the repair again"
        self._unplaced(claim, why, ledger_item, entity, target)

    def _moves(
        self, ledger_item: Mapping[str, Any] | None, entity: str, target: dict[str, Decimal]
    ) -> dict[Aggregate, Decimal]:
        """Each aggregate's change: from what the ledger item counts to what the item counts."""
        moves: dict[Aggregate, Decimal] = {(entity, board): amount for board, amount in target.items()}
        if ledger_item is not None:
            counted_entity, contribution = self.state(ledger_item)
            for board, amount in contribution.items():
                moves[(counted_entity, board)] = moves.get((counted_entity, board), Decimal(0)) - amount
        return {aggregate: amount for aggregate, amount in moves.items() if amount}

    def _commit(
        self,
        claim: str,
        key: dict[str, Any],
        ledger_item: dict[str, Any] | None,
        entity: str,
        target: dict[str, Decimal],
        moves: dict[Aggregate, Decimal],
        answered: tuple[dict[str, Any], ...] = (),
        read_at: int | None = None,
    ) -> bool:
        """One transaction: the ledger Put on the item as read (when it was read: `read_at`), the aggregates' ADDs,
        and the gone reports it answers deleted; False when it was cancelled."""
        if ledger_item is None:
            put = backfill_claim(self.claims, key, entity=entity, contribution=target, read_at=read_at)
        else:
            put = self._ledger_put(claim, ledger_item, entity, target, moves, read_at)
            if key:
                put["Put"]["Item"][DOWNLOAD_KEY] = stored_key(key)
        actions = [put, *answered]
        actions += [self._aggregate_add(aggregate, amount) for aggregate, amount in sorted(moves.items())]
        return self._transact(actions)

    def _ledger_put(
        self,
        claim: str,
        ledger_item: dict[str, Any],
        entity: str,
        target: dict[str, Decimal],
        moves: dict[Aggregate, Decimal],
        read_at: int | None = None,
    ) -> dict[str, Any]:
        """The ledger item moved to `target`, conditioned on its Version and Contribution as read; one with no Version
        (the backfill's) on its Rebases as read, which the move raises: no other writer's condition then holds. Its
        `ReadAt` is `read_at`, when the table's item it moves to was read (none when it moves to no item)."""
        entity = entity or ledger_item.get(BASE_ENTITY, {}).get("S", "")
        taken = {aggregate for aggregate, amount in moves.items() if amount < 0}
        item = {
            **ledger_item,
            BASE_ENTITY: {"S": entity},
            BASE_CONTRIBUTION: {"M": {board: {"N": str(amount)} for board, amount in target.items()}},
            DECREASED: decreased_value(decreased_of(ledger_item) | taken, entity),
        }
        item.pop(READ_AT, None)
        if read_at is not None:
            item[READ_AT] = {"N": str(read_at)}
        if VERSION in ledger_item:
            item[VERSION] = {"S": rebased_version(ledger_item[VERSION]["S"])}
        else:
            item[REBASES] = rebased_count(ledger_item)
        condition, names, values = as_read(ledger_item)
        put = {
            "TableName": self.claims,
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        return {"Put": put | ({"ExpressionAttributeValues": values} if values else {})}

    def _aggregate_add(self, aggregate: Aggregate, amount: Decimal) -> dict[str, Any]:
        """The aggregator's ADD: an addition puts the aggregate in the index, its order moved by the amount."""
        entity, board = aggregate
        names = self.deployment.names
        attribute_names = {"#count": names.count, "#order": names.order}
        values: dict[str, Any] = {":amount": {"N": str(amount)}, ":scaled": {"N": str(int(amount * ORDER_SCALE))}}
        if amount < 0:
            expression = "ADD #count :amount, #order :scaled"
        else:
            expression = "ADD #count :amount SET #period = :period, #order = if_not_exists(#order, :tie) + :scaled"
            attribute_names["#period"] = names.period
            values[":period"] = {"S": leaderboard_partition(board, entity, self.deployment.shards())}
            values[":tie"] = {"N": str(order_tiebreak(entity, self.deployment.sum_attribute is not None))}
        return {
            "Update": {
                "TableName": self.deployment.aggregates,
                "Key": {names.entity: {"S": entity}, names.sort_key: {"S": board}},
                "UpdateExpression": expression,
                "ExpressionAttributeNames": attribute_names,
                "ExpressionAttributeValues": values,
            }
        }

    def _leave_index(self, ledger_item: Mapping[str, Any] | None, moves: dict[Aggregate, Decimal]) -> None:
        """As the aggregator does: every aggregate taken from (now, or by the key's last move: Decreased), at 0, leaves
        the index."""
        aggregates = {aggregate for aggregate, amount in moves.items() if amount < 0}
        aggregates |= decreased_of(ledger_item)
        names = self.deployment.names
        for entity, board in sorted(aggregates):
            try:
                self.dynamodb.update_item(
                    TableName=self.deployment.aggregates,
                    Key={names.entity: {"S": entity}, names.sort_key: {"S": board}},
                    UpdateExpression="REMOVE #period, #order",
                    ConditionExpression="#count <= :zero AND attribute_exists(#period)",
                    ExpressionAttributeNames={"#count": names.count, "#period": names.period, "#order": names.order},
                    ExpressionAttributeValues={":zero": {"N": "0"}},
                )
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise

    def settle_decreased(self, ledger_item: Mapping[str, Any]) -> None:
        """A key in step, or gone, whose ledger item names aggregates its last move took from (`Decreased`): the index
        step a handler or rebase stopped before (no record of the key delivered since). A conditional REMOVE of an
        aggregate at 0, run again, changes nothing; `Decreased` stays for the key's next record."""
        if decreased_of(ledger_item):
            self._leave_index(ledger_item, {})

    # ------------------------------------------------------------------ reporting

    def _transact(self, actions: list[dict[str, Any]]) -> bool:
        """One transaction; False when a condition failed or another transaction conflicted (the key is read again)."""
        try:
            self.dynamodb.transact_write_items(TransactItems=actions)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = error.response.get("CancellationReasons") or []
            if not any(reason.get("Code") in ("ConditionalCheckFailed", "TransactionConflict") for reason in reasons):
                raise
            return False
        return True
