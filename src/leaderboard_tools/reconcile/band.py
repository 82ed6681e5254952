"""The repair band: the repair's conditional write opening it, its record in the band queue, and its close."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.band_holds import held_by_download, settle, shard_lineage, spans_shards
from leaderboard_core.bookkeeping import (
    APPLIED_SEQUENCE,
    RECOUNT_BAND,
    RECOUNT_HELD,
    RECOUNTED_THROUGH,
    WATERMARKS_PRUNED,
    WATERMARKS_PRUNED_UNDER,
)
from leaderboard_core.index_layout import (
    FIRST_REACHED,
    LATEST_COUNTED,
    ORDER_SCALE,
    leaderboard_partition,
    leave_index,
    order_tiebreak,
    ranked_order,
)
from leaderboard_tools.output_format import counted
from leaderboard_tools.reconcile.phases import CLOSING_BANDS, WAITING_FOR_FENCE, WAITING_FOR_STREAM, SecondsWaited
from leaderboard_tools.reconcile.report import Difference, Snapshot
from leaderboard_tools.stream_reading import stream_shards

CLOSED_ATTRIBUTE = "RecountClosed"
"""The last band a close removed and what it added ("<token>|<deadline>|<added>"): the repair's own, written by its
close, tells a close whose response was lost from a band another repair replaced. The aggregator never reads it."""
BAND_MESSAGE_KIND = "recount_band"
"""The band queue's record of a band (the failure queue's, in a deployment without one), sent before the band
opens: `recover` recounts an aggregate whose band outlived its deadline (its repair was killed) and deletes the record
of a band that is gone."""
BAND_RECORD_MARGIN_SECONDS = 60
"""How long past a band's deadline the aggregator waits before it calls the band expired (band_records.py): its
record is delayed that much more, so that it is met once, past both."""
MAX_DELAY_SECONDS = 900
"""SQS's longest DelaySeconds: a band's record stays out of sight (and out of the queue's alarm) until then."""
BAND_SECONDS = 300.0
"""How long a band waits after F for the records created before it to reach the aggregator (the iterator-age alarm
fires at 300 s of lag): a record later than that is refused and reported."""
BAND_SETTLE_SECONDS = 5.0
"""After F, before the first look at the stream: a record is written to the stream after its item."""
BAND_POLL_SECONDS = 5.0
BAND_ID_BUDGET = 2_000_000
"""Download ids kept in memory for open bands (about 100 bytes each): past it, bands are closed before more open."""
CLOSE_ROUNDS = 8
"""A close is retried when the aggregator held one more record between its read and its write."""
RETRIED_CONFLICTS = ("TransactionConflictException",)
"""An UpdateItem meeting the aggregator's proof transaction on the same item ("conflicts with an ongoing
TransactWriteItems request that includes the same item", DynamoDB Developer Guide, *Transaction conflict handling*):
botocore's standard retries do not retry it, so the repair and the close do."""


@dataclass
class OpenBand:
    """A repaired aggregate whose band is open: what its close needs."""

    board: str
    difference: Difference
    value: str
    """"<token>|<deadline>", as written: the close is conditioned on it."""
    fence: int
    deadline: int
    seen: set[str]
    closed: bool = False
    close_sent: bool = False
    """A close's write was sent without its success coming back: it may have landed."""


class RepairBand:
    """The Reconciler's writes: the repair that opens a band, the band's record, and its close."""

    @property
    def _band_queue_name(self) -> str:
        return "band queue" if self._deployment.recount_band_queue_url else "failure queue"

    def _record_band(self, board: str, entity_id: str, value: str, deadline: int) -> None:
        """The band's record, delayed toward its deadline (as far as SQS delays), in the band queue, where the
        aggregator meets it at the deadline and reports the band if it is still open; where a deployment has no
        band queue, in the failure queue itself."""
        body = {"kind": BAND_MESSAGE_KIND, "entityId": entity_id, "board": board, "band": value, "deadline": deadline}
        # An aggregator deployed before band records said "board" reads "period".
        body["period"] = board
        band_queue = self._deployment.recount_band_queue_url
        due = deadline + 1 + (BAND_RECORD_MARGIN_SECONDS if band_queue else 0)
        delay = min(MAX_DELAY_SECONDS, max(0, math.ceil(due - self.dynamodb_time())))
        queue = band_queue or self._deployment.failure_queue_url
        self._sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(body), DelaySeconds=delay)

    def _repair(
        self,
        board: str,
        entity_id: str,
        snapshot: Snapshot,
        recounted: int,
        fence: int,
        band: str,
        latest: int | None = None,
    ) -> bool:
        """One conditional UpdateItem: count, order, partition, fence and band, if the aggregate is still as read; with
        the tie-break first_reached, the recount's latest counted download's instant too (`latest`, None: none)."""
        names = self._names
        attribute_names = {
            "#count": names.count,
            "#order": names.order,
            "#period": names.period,
            "#fence": RECOUNTED_THROUGH,
            "#band": RECOUNT_BAND,
            "#held": RECOUNT_HELD,
            "#pruned": WATERMARKS_PRUNED,
            "#pruned_under": WATERMARKS_PRUNED_UNDER,
            "#applied": APPLIED_SEQUENCE,
        }
        values: dict[str, Any] = {
            ":recounted": {"N": str(recounted)},
            ":order": {
                "N": str(ranked_order(recounted, entity_id, latest=latest, tie_break=self._deployment.tie_break))
            },
            ":partition": {"S": leaderboard_partition(board, entity_id, self._deployment.shards())},
            ":fence": {"N": str(max(fence, snapshot.fence or 0))},
            ":band": {"S": band},
        }
        retractions = self._deployment.retractions
        if snapshot.exists:
            # With retractions an aggregate back at 0 left the index: its count says it is one.
            conditions = ["#count = :stored"] if retractions else ["attribute_exists(#period)", "#count = :stored"]
            values[":stored"] = {"N": str(snapshot.count)}
        else:
            conditions = ["attribute_not_exists(#count)"]
        if snapshot.fence is None:
            conditions.append("attribute_not_exists(#fence)")
        else:
            conditions.append("#fence = :fence_read")
            values[":fence_read"] = {"N": str(snapshot.fence)}
        for index, (name, value) in enumerate(snapshot.watermarks):
            attribute_names[f"#w{index}"] = name
            values[f":w{index}"] = {"S": value}
            conditions.append(f"#w{index} = :w{index}")
        # A download another band held since the snapshot changes no count and may add no watermark seen here (a
        # shard new to the aggregate): the band and its held set are part of what must be as read.
        if snapshot.band is None:
            conditions.append("attribute_not_exists(#band)")
        else:
            conditions.append("#band = :band_read")
            values[":band_read"] = {"S": snapshot.band}
        if snapshot.held:
            conditions.append("size(#held) = :held_read")
            values[":held_read"] = {"N": str(snapshot.held)}
        else:
            conditions.append("attribute_not_exists(#held)")
        # A band or held set another repair left is superseded: this recount counts what it held.
        update = (
            "SET #count = :recounted, #order = :order, #period = :partition, #fence = :fence, #band = :band"
            " REMOVE #pruned, #pruned_under, #applied, #held"
        )
        if self._deployment.tie_break == FIRST_REACHED:
            # The aggregator moves LatestCounted only with the count and a watermark, which the conditions hold.
            attribute_names["#latest"] = LATEST_COUNTED
            if latest is None:
                update += ", #latest"
            else:
                update = update.replace(" REMOVE", ", #latest = :latest REMOVE")
                values[":latest"] = {"N": str(latest)}
        if retractions and recounted == 0:
            # As the aggregator leaves it: a count of 0 is out of the index until a download adds to it.
            update = (
                "SET #count = :recounted, #fence = :fence, #band = :band"
                " REMOVE #pruned, #pruned_under, #applied, #held, #order, #period"
            )
            del values[":order"], values[":partition"]
        if self._deployment.tie_break != FIRST_REACHED and snapshot.latest is not None:
            # Left by the tie-break first_reached: the order just set is the entity tie-break's.
            attribute_names["#latest"] = LATEST_COUNTED
            update += ", #latest"
        for _ in range(CLOSE_ROUNDS):
            try:
                return self._repair_write(board, entity_id, update, conditions, attribute_names, values, band)
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") not in RETRIED_CONFLICTS:
                    raise
                self._sleep(self._band_poll)
        return False

    def _repair_write(
        self,
        board: str,
        entity_id: str,
        update: str,
        conditions: list[str],
        attribute_names: dict[str, str],
        values: dict[str, Any],
        band: str,
    ) -> bool:
        """The repair's UpdateItem; a failed condition that finds this repair's own band means its response was lost."""
        names = self._names
        try:
            self._dynamodb.update_item(
                TableName=self._aggregates_table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": board}},
                # The fence now guards every shard without a watermark: what a pruning or release 0.1.0 left
                # (a progress table that can no longer vouch for it) stops refusing new records.
                UpdateExpression=update,
                ConditionExpression=" AND ".join(conditions),
                ExpressionAttributeNames=attribute_names,
                ExpressionAttributeValues=values,
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # botocore retries a request whose response was lost: the band, unique to this repair, says it landed.
            item = self._dynamodb.get_item(
                TableName=self._aggregates_table,
                Key={names.entity: {"S": entity_id}, names.sort_key: {"S": board}},
                ConsistentRead=True,
            ).get("Item")
            return ((item or {}).get(RECOUNT_BAND) or {}).get("S") == band
        return True

    def _close_bands(self, bands: list[OpenBand]) -> None:
        """Wait until F has passed and no record created by then is left for the aggregator, then close each band."""
        if not bands:
            return
        keys = {(band.difference.entity_id, band.board) for band in bands}
        boards = {band.board for band in bands}
        fence = max(band.fence for band in bands)
        give_up = fence + 1 + self._band_settle + self._band_seconds
        # Creation times are whole seconds, rounded down: a record of the fence's own second is at the fence.
        first_look = fence + 1 + self._band_settle
        waited: SecondsWaited | None = None
        reading = caught_up = False
        while not caught_up:
            now = self.dynamodb_time()
            if waited is None:
                self._phase(WAITING_FOR_FENCE, max(0, math.ceil(first_look - now)), unit="s")
                waited = SecondsWaited(self._on_phase, now)
            waited.to(now)
            if now >= give_up:
                break
            if now < first_look:
                self._sleep(min(self._band_poll, first_look - now))
                continue
            if not reading:
                self._phase(WAITING_FOR_STREAM, max(1, math.ceil(give_up - now)), unit="s", bound=True)
                waited, reading = SecondsWaited(self._on_phase, now), True
            in_flight, _ = self._in_flight(boards, fence, budget=max(1.0, give_up - now))
            caught_up = in_flight is not None and not (in_flight & keys)
            if not caught_up:
                self._sleep(self._band_poll)
        self._phase(CLOSING_BANDS, len(bands), unit="bands")
        for band in bands:
            self._close(band, caught_up)
            self._on_phase(1)

    def _close_at_once(self, bands: list[OpenBand]) -> None:
        """A run stopped by an error (or an interrupt) closes its open bands without waiting, as far as it can: what
        they held is settled now, and a record arriving later is refused and reported rather than held for nobody."""
        for band in bands:
            if band.closed:
                continue
            self._closing = band
            try:
                self._close(band, caught_up=False)
            except Exception as error:  # the original error is what the operator must see: this one is noted
                band.difference.reason = f"its band could not be closed ({error}): it expires and is reported"

    def _close(self, band: OpenBand, caught_up: bool) -> None:
        """Add what the band held that the recount did not see, and remove the band, as one conditional write."""
        names, difference = self._names, band.difference
        key = {names.entity: {"S": difference.entity_id}, names.sort_key: {"S": band.board}}
        for _ in range(CLOSE_ROUNDS):
            item = (
                self._dynamodb.get_item(TableName=self._aggregates_table, Key=key, ConsistentRead=True).get("Item")
                or {}
            )
            closed = (item.get(CLOSED_ATTRIBUTE) or {}).get("S") or ""
            if closed.rpartition("|")[0] == band.value:
                # This close's own write, whose response was lost and whose retry found the band gone.
                self._closed(band, int(closed.rpartition("|")[2]), caught_up)
                return
            if (item.get(RECOUNT_BAND) or {}).get("S") != band.value:
                if band.close_sent:
                    # The close's write may have landed (its response lost) and another repair closed its own band
                    # since, overwriting RecountClosed; or another repair replaced the band first.
                    difference.state = "unknown"
                    difference.reason = (
                        "its band was closed or replaced by another repair's, not known which (its close's response "
                        "was lost, and RecountClosed now names another band): recount to be sure"
                    )
                    return
                difference.reason = "another repair replaced its band: that repair's report counts what it held"
                return
            held = set((item.get(RECOUNT_HELD) or {}).get("SS") or [])
            records, malformed = held_by_download(held)
            settlement = settle(
                records,
                lambda download: 1 if download in band.seen else 0,
                self._shard_lineage() if spans_shards(records) else {},
            )
            missed = settlement.change
            attribute_names = {
                "#count": names.count,
                "#order": names.order,
                "#band": RECOUNT_BAND,
                "#held": RECOUNT_HELD,
                "#closed": CLOSED_ATTRIBUTE,
            }
            values: dict[str, Any] = {
                ":band": {"S": band.value},
                ":closed": {"S": f"{band.value}|{missed}"},
                ":missed": {"N": str(missed)},
                ":scaled": {"N": str(missed * ORDER_SCALE)},
            }
            update = "ADD #count :missed SET #order = #order + :scaled, #closed = :closed REMOVE #band, #held"
            if self._deployment.retractions:
                # A count that went back to 0 meanwhile left the index: the close puts it back, rebuilding its order.
                update = (
                    "ADD #count :missed SET #order = if_not_exists(#order, :tiebreak) + :scaled, #period = :partition,"
                    " #closed = :closed REMOVE #band, #held"
                )
                attribute_names["#period"] = names.period
                values[":tiebreak"] = {"N": str(order_tiebreak(difference.entity_id))}
                values[":partition"] = {
                    "S": leaderboard_partition(band.board, difference.entity_id, self._deployment.shards())
                }
            if held:
                values[":size"] = {"N": str(len(held))}
                unchanged = "size(#held) = :size"
            else:
                unchanged = "attribute_not_exists(#held)"
            band.close_sent = True
            try:
                written = self._dynamodb.update_item(
                    TableName=self._aggregates_table,
                    Key=key,
                    # The held set only grows while the band is open: the same size is the same set.
                    UpdateExpression=update,
                    ConditionExpression=f"#band = :band AND {unchanged}",
                    ExpressionAttributeNames=attribute_names,
                    ExpressionAttributeValues=values,
                    **({"ReturnValues": "ALL_NEW"} if self._deployment.retractions else {}),
                )
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code")
                if code == "ConditionalCheckFailedException":
                    continue
                if code in RETRIED_CONFLICTS:
                    self._sleep(self._band_poll)
                    continue
                raise
            if self._deployment.retractions:
                self._leave_index_at_zero(key, written.get("Attributes") or {})
            self._closed(band, int(missed), caught_up)
            if settlement.unsettled or malformed:
                difference.state = "unsettled"
                difference.reason = "; ".join(
                    [
                        f"its band held records of "
                        f"{counted(len(settlement.unsettled) + len(malformed), 'download')} whose last record"
                        " it could not tell (records of shards the stream's description does not order, or "
                        "entries it does not read): their part is left as recounted; run `reconcile --repair` again",
                        *([difference.reason] if difference.reason else []),
                    ]
                )
            elif missed and self._deployment.tie_break == FIRST_REACHED:
                # A held record names its download by a digest of its key: the close cannot read its Timestamp.
                difference.state = "unsettled"
                difference.reason = (
                    f"its close added {counted(int(missed), 'download')} its recount missed, whose instants it cannot "
                    "read: the tie-break first_reached may rank it by an older latest download; run "
                    "`reconcile --repair` again"
                )
            return
        difference.reason = f"its band kept changing for {CLOSE_ROUNDS} reads: left open, it expires and is reported"

    def _shard_lineage(self) -> dict[str, frozenset[str]]:
        """Each shard's tag -> its ancestors' tags, from the stream's description: which of a download's held records
        of different shards came last (a parent's records come before its child's)."""
        arn = self._deployment.stream_arn or ""
        return shard_lineage(
            arn, [(shard["ShardId"], shard.get("ParentShardId")) for shard in stream_shards(self._streams, arn)]
        )

    def _leave_index_at_zero(self, key: dict[str, Any], item: dict[str, Any]) -> None:
        """A count the close left at 0 leaves the index, as the aggregator's does."""
        names = self._names
        if names.period not in item or Decimal((item.get(names.count) or {}).get("N", "1")) != 0:
            return
        try:
            self._dynamodb.update_item(
                **leave_index(self._aggregates_table, key, names.count, names.period, names.order)
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _closed(self, band: OpenBand, missed: int, caught_up: bool) -> None:
        band.difference.added_at_close = missed
        band.closed = True
        if not caught_up:
            band.difference.reason = (
                "its band closed before the stream showed every record created by its fence delivered: such a "
                "record is refused and reported (recover repairs it)"
            )
