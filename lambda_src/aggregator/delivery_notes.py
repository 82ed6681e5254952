"""One reader per shard: records the mapping may have skipped, trimmed, reported without reading the stream.

A mapping paused past the 24 hours of retention resumes at the trim horizon and says nothing of what it skipped (L6).
Per shard, the progress table keeps `one-reader|<shard id>`: the highest record delivered (`High`) and its creation
time (`HighCreated`), the time up to which nothing can have aged unseen (`Vouched`), and the records of invocations
that have not finished (`Unfinished`: a killed invocation's records the mapping may never hand again). Every record
of a lineage nothing was delivered from was written after the highest record delivered from its nearest ancestor
(S7), or after the stream began, so that record's age bounds theirs. `records_trimmed` is reported wherever a record
that old may have been skipped: at a shard's next delivery, its first child's, and on the schedule (L7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leaderboard_core.bookkeeping import SHARD_KEY
from stream_shards import StreamShards

NOTE_PREFIX = "one-reader|"
"""`one-reader|<shard id>`: what the handler noted of a shard's deliveries."""
RETENTION_SECONDS = 24 * 3600
"""S5: "All data in DynamoDB Streams is subject to a 24 hour lifetime."."""
Note = dict[str, Any]
Message = dict[str, Any]


def trimmed_message(
    stream_arn: str, shard: str, after: int, through: int | None, lost_ancestors: bool = False
) -> Message:
    """records_trimmed: records of the shard after `after` (through `through`, or on), and with `lost_ancestors` every
    record of its ancestors, may have been skipped, trimmed, by the mapping: recover recounts."""
    message: Message = {
        "kind": "records_trimmed",
        "shardId": shard,
        "streamArn": stream_arn,
        "checkpoint": str(after),
        "firstReadableSequence": None if through is None else str(through),
    }
    if lost_ancestors:
        message["lostAncestorOf"] = shard
    return message


class DeliveryNotes:
    """The notes of each shard's deliveries, and the checks that read them."""

    def __init__(self, client: Any, progress_table: str, shards: StreamShards, clock: Callable[[], float]) -> None:
        self.client = client
        self.progress_table = progress_table
        self.shards = shards
        self.clock = clock

    def note_of(self, shard: str) -> Note | None:
        item = self.client.get_item(
            TableName=self.progress_table, Key={SHARD_KEY: {"S": NOTE_PREFIX + shard}}, ConsistentRead=True
        )
        return item.get("Item")

    def created(self, record: dict[str, Any]) -> float:
        """A record's ApproximateCreationDateTime (epoch seconds, as a Lambda event gives it), never later than now: a
        record is delivered after it was written, and a time beyond the clock (milliseconds read as seconds, a
        made-up event) would otherwise stand for a record that never ages, silencing every later check."""
        return min(float(record["dynamodb"]["ApproximateCreationDateTime"]), self.clock())

    def _expired(self, created: float) -> bool:
        return created <= self.clock() - RETENTION_SECONDS

    # ------------------------------------------------------------------ at a delivery

    def check_delivery(self, stream_arn: str, shard: str, note: Note | None, lowest: int) -> list[Message]:
        """Reports of records the mapping may have skipped, trimmed, before this delivery (whose lowest record is
        `lowest`)."""
        if note is not None:
            messages = self.unfinished_trimmed(stream_arn, shard, note)
            high = int(note["High"]["N"]) if "High" in note else None
            if (high is None or lowest > high) and self._expired(float(note["Vouched"]["N"])):
                messages.append(trimmed_message(stream_arn, shard, high or 0, lowest))
            return messages
        messages, aged = self.lineage_aged(stream_arn, shard)
        if aged:
            messages.append(trimmed_message(stream_arn, shard, 0, lowest, lost_ancestors=True))
        return messages

    def unfinished_trimmed(self, stream_arn: str, shard: str, note: Note) -> list[Message]:
        """Records delivered to invocations that never finished, past the retention: the mapping will not hand them
        again (it discards them, or skipped them at a resume)."""
        unfinished = note.get("Unfinished", {}).get("M", {})
        old = [int(sequence) for sequence, created in unfinished.items() if self._expired(float(created["N"]))]
        return [trimmed_message(stream_arn, shard, min(old) - 1, max(old))] if old else []

    def lineage_aged(self, stream_arn: str, shard: str) -> tuple[list[Message], bool]:
        """For a shard nothing was delivered from: the unfinished records of its ancestors, and whether a record of its
        lineage never delivered may be past the retention. A report about an ancestor bounds nothing below it."""
        messages: list[Message] = []
        for ancestor in self.shards.ancestors(stream_arn, shard):
            note = self.note_of(ancestor)
            if note is None:
                continue
            messages += self.unfinished_trimmed(stream_arn, ancestor, note)
            if "HighCreated" in note:
                return messages, self._expired(float(note["HighCreated"]["N"]))
        return messages, self._expired(self.shards.created(stream_arn))

    def note_delivered(
        self, stream_arn: str, shard: str, note: Note | None, records: list[dict[str, Any]], vouched: bool
    ) -> None:
        """Before applying: the highest record delivered, and this invocation's records until it finishes. `vouched`:
        this delivery reported what may have been trimmed before it."""
        highest = max(records, key=lambda record: int(record["dynamodb"]["SequenceNumber"]))
        began = str(self.shards.created(stream_arn))
        item = dict(note or {SHARD_KEY: {"S": NOTE_PREFIX + shard}, "Vouched": {"N": began}})
        if "High" not in item or int(highest["dynamodb"]["SequenceNumber"]) > int(item["High"]["N"]):
            item["High"] = {"N": highest["dynamodb"]["SequenceNumber"]}
            created = self.created(highest)
            item["HighCreated"] = {"N": str(created)}
            item["Vouched"] = {"N": str(max(created, float(item["Vouched"]["N"])))}
        if vouched:
            item["Vouched"] = {"N": str(self.clock())}
        unfinished = {
            sequence: created
            for sequence, created in item.get("Unfinished", {}).get("M", {}).items()
            if not (vouched and self._expired(float(created["N"])))
        }
        for record in records:
            unfinished[record["dynamodb"]["SequenceNumber"]] = {"N": str(self.created(record))}
        item["Unfinished"] = {"M": unfinished}
        self.client.put_item(TableName=self.progress_table, Item=item)

    def note_finished(self, shard: str, records: list[dict[str, Any]]) -> None:
        """After applying: this invocation's records are no longer unfinished."""
        note = self.note_of(shard)
        if note is None:
            return
        done = {record["dynamodb"]["SequenceNumber"] for record in records}
        left = {s: created for s, created in note.get("Unfinished", {}).get("M", {}).items() if s not in done}
        self.client.put_item(TableName=self.progress_table, Item={**note, "Unfinished": {"M": left}})

    # ------------------------------------------------------------------ on the schedule

    def sweep(self, stream_arn: str) -> tuple[list[Message], set[str]]:
        """Every listed shard checked as a delivery would, for the lineages nothing delivers to: the reports, and the
        shards they were found for, to be vouched for once the reports are sent (`vouch`)."""
        listing = self.shards.describe(stream_arn)
        messages: list[Message] = []
        reported: set[str] = set()
        for shard in sorted(listing.parents):
            note = self.note_of(shard)
            if note is not None:
                found = self.unfinished_trimmed(stream_arn, shard, note)
                if shard in listing.open and self._expired(float(note["Vouched"]["N"])):
                    high = int(note["High"]["N"]) if "High" in note else 0
                    found.append(trimmed_message(stream_arn, shard, high, None))
            else:
                found, aged = self.lineage_aged(stream_arn, shard)
                if aged:
                    found.append(trimmed_message(stream_arn, shard, 0, None, lost_ancestors=True))
            messages += found
            reported |= {shard} if found else set()
        return messages, reported

    def vouch(self, shards: set[str]) -> None:
        """The shards reported on are vouched for until now: a later check reports only what ages after it."""
        for shard in sorted(shards):
            note = self.note_of(shard) or {SHARD_KEY: {"S": NOTE_PREFIX + shard}}
            unfinished = {
                sequence: created
                for sequence, created in note.get("Unfinished", {}).get("M", {}).items()
                if not self._expired(float(created["N"]))
            }
            item = {**note, "Vouched": {"N": str(self.clock())}, "Unfinished": {"M": unfinished}}
            self.client.put_item(TableName=self.progress_table, Item=item)
