"""A model of how AWS may deliver a table's stream to a Lambda function: the oracle of the unit tier.

It allows everything AWS's documentation allows and nothing it rules out, and picks among the
allowed behaviours at random (seeded), adversarially: several shards, rollover and splits,
a hot song's items split across sibling shards read at the same time, sequence numbers that
compare only within a shard, concurrent batches per shard, retries, bisection, partial batch
responses, functions killed mid-batch, responses lost after the work was done, writes that land
after their caller gave up, and tumbling windows with state. Each rule names the sentence it
encodes (`DOCS`). The emulators do none of this; they keep one shard, in order.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.stream_model.designs import TABLE_ARN, Design
from tests.stream_model.fake_dynamodb import FakeDynamoDB

DYNAMODB_STREAMS = "DynamoDB Developer Guide, 'Change data capture for DynamoDB Streams'"
DYNAMODB_STREAMS_API = "DynamoDB Streams API Reference, 'Shard' and 'StreamRecord'"
PARTITION_KEYS = "DynamoDB Developer Guide, 'Best practices for designing and using partition keys effectively'"
LAMBDA_DDB = "Lambda Developer Guide, 'Using AWS Lambda with Amazon DynamoDB'"
LAMBDA_WINDOWS = (
    "Lambda Developer Guide, 'Implementing stateful DynamoDB stream processing in Lambda' (tumbling windows)"
)

DOCS: dict[str, tuple[str, str]] = {
    "exactly-once-in-stream": (DYNAMODB_STREAMS, "Each stream record appears exactly once in the stream."),
    "per-item-order": (
        DYNAMODB_STREAMS,
        "For each item that is modified in a DynamoDB table, the stream records appear in the same sequence as the "
        "actual modifications to the item.",
    ),
    "shards-split": (
        DYNAMODB_STREAMS,
        "Any shard can also split into multiple new shards; this also occurs automatically. (It's also possible for a "
        "parent shard to have just one child shard.)",
    ),
    "parent-before-child": (
        DYNAMODB_STREAMS,
        "Because shards have a lineage (parent and children), an application must always process a parent shard "
        "before it processes a child shard.",
    ),
    "sequence-within-shard": (
        DYNAMODB_STREAMS_API,
        "SequenceNumberRange: The range of possible sequence numbers for the shard. (Nothing relates the ranges of "
        "different shards.)",
    ),
    "split-for-heat": (
        PARTITION_KEYS,
        "You can also break up an item collection into segments by sort key, as long as the item collection isn't "
        "traffic that is tracked by a monotonic increase or decrease of the sort key. ... Adaptive capacity will not "
        "split item collections across multiple partitions of the table when there is a local secondary index.",
    ),
    "parallelization": (
        LAMBDA_DDB,
        "If you increase the number of concurrent batches per shard, Lambda still ensures in-order processing at the "
        "item (partition and sort key) level.",
    ),
    "retries": (
        LAMBDA_DDB,
        "If the function receives the records but returns an error, Lambda retries until the records in the batch "
        "expire, exceed the maximum age, or reach the configured retry quota.",
    ),
    "bisect": (
        LAMBDA_DDB,
        "For function errors, you can also configure the event source mapping to split a failed batch into two "
        "batches. ... Splitting a batch does not count towards the retry quota. / If your invocation fails and "
        "BisectBatchOnFunctionError is turned on, the batch is bisected regardless of your ReportBatchItemFailures "
        "setting.",
    ),
    "partial-batch": (
        LAMBDA_DDB,
        "If the batchItemFailures array contains multiple items, Lambda uses the record with the lowest sequence "
        "number as the checkpoint. Lambda then retries all records starting from that checkpoint.",
    ),
    "at-least-once": (
        LAMBDA_WINDOWS,
        "Lambda will process each record at least once, but doesn't guarantee that each record will be processed "
        "only once. In rare cases, such as error handling, some records might be processed more than once. Records "
        "are always processed in order the first time. If records are processed more than once, they might be "
        "processed out of order.",
    ),
    "window-state": (
        LAMBDA_WINDOWS,
        "with tumbling windows, you can maintain your state across invocations. ... If the response does not contain "
        "a state property, Lambda considers this a failed invocation.",
    ),
    "window-final": (
        LAMBDA_WINDOWS,
        "At the end of the window, the flag isFinalInvokeForWindow is set to true ... After successful invocation, "
        "your function checkpoints the sequence number and stream processing continues. If invocation is "
        "unsuccessful, your Lambda function suspends further processing until a successful invocation.",
    ),
    "window-boundaries": (
        LAMBDA_WINDOWS,
        "Lambda determines tumbling window boundaries based on the time when records were inserted into the stream.",
    ),
    "window-resharding": (
        LAMBDA_WINDOWS,
        "When the shard ends, Lambda considers the window closed, and the child shards start their own window in a "
        "fresh state.",
    ),
    "window-retries": (
        LAMBDA_WINDOWS,
        "Tumbling windows fully support the existing retry policies maxRetryAttempts and maxRecordAge.",
    ),
}


@dataclass(frozen=True)
class Hazards:
    """What the model may do; every switch is something the documentation allows."""

    split_for_heat: bool = True
    shard_splits: bool = True
    child_sequences_lower: bool = True
    parallelization_factor: int = 1
    function_failures: bool = True
    late_writes: bool = True
    final_invocation_with_records: bool = True


ALL_HAZARDS = Hazards()
ONE_ORDERED_SHARD = Hazards(
    split_for_heat=False,
    shard_splits=False,
    child_sequences_lower=False,
    function_failures=False,
    late_writes=False,
    final_invocation_with_records=False,
)


@dataclass(frozen=True)
class Written:
    song_id: str
    download_id: str
    timestamp: str
    created: float


@dataclass
class Shard:
    shard_id: str
    parent_id: str | None
    records: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False
    next_sequence: int = 0


@dataclass
class StreamOfTable:
    """The table's stream: which shard each new item's INSERT lands in, and with which sequence number."""

    rng: random.Random
    hazards: Hazards
    stream_arn: str = f"{TABLE_ARN}/stream/2018-01-01T00:00:00.000"
    partitions: int = 3
    shards: dict[str, Shard] = field(default_factory=dict)
    open_shard: dict[str, str] = field(default_factory=dict)
    """Partition -> its open shard; a hot song's sibling partitions are named '<partition>/<sibling>'."""
    hot_songs: set[str] = field(default_factory=set)
    _counter: int = 0

    def _new_shard(self, parent: Shard | None) -> Shard:
        self._counter += 1
        shard_id = f"shardId-{self._counter:020d}-{self.rng.getrandbits(32):08x}"
        if parent is None:
            start = self.rng.randint(10**20, 2 * 10**20)
        elif self.hazards.child_sequences_lower and self.rng.random() < 0.5:
            # sequence-within-shard: nothing relates a child's numbers to its parent's
            start = max(10**20, (parent.records[0]["sequence"] if parent.records else parent.next_sequence) - 10**6)
        else:
            start = parent.next_sequence + self.rng.randint(1, 1000)
        shard = Shard(shard_id, parent.shard_id if parent else None, next_sequence=start)
        self.shards[shard_id] = shard
        return shard

    def _partition_of(self, song_id: str, download_id: str) -> str:
        base = f"p{int(hashlib.sha256(song_id.encode()).hexdigest(), 16) % self.partitions}"
        if song_id in self.hot_songs:
            # split-for-heat: the song's item collection is split by sort key over sibling partitions
            sibling = int(hashlib.sha256(download_id.encode()).hexdigest(), 16) % 2
            return f"{base}/{sibling}"
        return base

    def write(self, download: Written) -> None:
        """One PutItem of a new item: one INSERT record, in the open shard of the item's partition (exactly-once)."""
        partition = self._partition_of(download.song_id, download.download_id)
        if partition not in self.open_shard:
            self.open_shard[partition] = self._new_shard(None).shard_id
        shard = self.shards[self.open_shard[partition]]
        if self.hazards.shard_splits and shard.records and self.rng.random() < 0.02:
            # shards-split: the shard ends; one child (rollover) takes over this partition
            shard.closed = True
            shard = self._new_shard(shard)
            self.open_shard[partition] = shard.shard_id
        shard.next_sequence += self.rng.randint(1, 50)
        sequence = shard.next_sequence
        image = {
            "songID": {"S": download.song_id},
            "SK": {"S": download.download_id},
            "UserID": {"S": "user1"},
            "Timestamp": {"S": download.timestamp},
        }
        shard.records.append(
            {
                "sequence": sequence,
                "created": download.created,
                "event": {
                    "eventID": f"{shard.shard_id}-{sequence}",
                    "eventName": "INSERT",
                    "eventVersion": "1.1",
                    "eventSource": "aws:dynamodb",
                    "awsRegion": "us-east-1",
                    "eventSourceARN": self.stream_arn,
                    "dynamodb": {
                        "ApproximateCreationDateTime": download.created,
                        "Keys": {"songID": image["songID"], "SK": image["SK"]},
                        "NewImage": image,
                        "SequenceNumber": str(sequence),
                        "SizeBytes": 100,
                        "StreamViewType": "NEW_IMAGE",
                    },
                },
            }
        )

    def end(self) -> None:
        for shard in self.shards.values():
            shard.closed = True


@dataclass(frozen=True)
class Mapping:
    batch_size: int = 25
    tumbling_window_seconds: int | None = None
    bisect_batch_on_function_error: bool = True
    maximum_retry_attempts: int | None = None
    """None: retried until it succeeds (the model's histories are short enough for records not to expire)."""


@dataclass
class Discarded:
    shard_id: str
    sequences: list[int]
    window_start: int | None


@dataclass
class Lane:
    """Lambda's reader of one shard: checkpoint, window and its state, and the batches still to (re)try."""

    shard: Shard
    checkpoint: int = 0
    window_start: int | None = None
    window_first: int = 0
    """Index of the window's first record: what a discarded final invocation takes with it."""
    state: dict[str, Any] | None = None
    retry_queue: list[tuple[int, int]] = field(default_factory=list)
    attempts: int = 0
    final_pending: bool = False
    final_records: tuple[int, int] | None = None
    done: bool = False

    def close_window(self) -> None:
        self.state, self.window_start, self.final_pending, self.final_records = None, None, False, None
        self.attempts = 0


@dataclass
class HistoryResult:
    design: str
    downloads: int
    counted: dict[tuple[str, str], int]
    truth: Counter[tuple[str, str]]
    discarded: list[Discarded]
    invocations: int
    failures_injected: int
    writes: int

    @property
    def over_counted(self) -> int:
        return sum(
            max(0, self.counted.get(key, 0) - self.truth.get(key, 0)) for key in set(self.truth) | set(self.counted)
        )

    @property
    def lost(self) -> int:
        return sum(
            max(0, self.truth.get(key, 0) - self.counted.get(key, 0)) for key in set(self.truth) | set(self.counted)
        )


def utc_month(timestamp: str) -> str:
    """The oracle's own month: independent of the aggregator's parser."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m")


def random_downloads(rng: random.Random, count: int, songs: int = 6, start: float = 1_600_000_000.0) -> list[Written]:
    """Skewed: song1 is the hot one. Timestamps near month ends, some with offsets that change the UTC month."""
    downloads, created = [], start
    weights = [1 / rank**1.1 for rank in range(1, songs + 1)]
    for number in range(count):
        song = rng.choices([f"song{index}" for index in range(1, songs + 1)], weights=weights)[0]
        month = rng.choice(["01", "02"])
        day = rng.choice(["01", "15", "28"])
        zone = rng.choice(["Z", "Z", "Z", "+02:00", "-05:00"])
        hour = rng.choice(["00", "12", "23"])
        downloads.append(
            Written(
                song,
                f"download-{number:05d}-{rng.getrandbits(24):06x}",
                f"2018-{month}-{day}T{hour}:30:00{zone}",
                created,
            )
        )
        created += rng.choice([0.05, 0.2, 0.5, 1.5])
    return downloads


class DeliveryModel:
    """Runs one history: writes the downloads into a modelled stream and delivers it to a design."""

    def __init__(self, seed: int, design: Design, fake: FakeDynamoDB, hazards: Hazards, mapping: Mapping) -> None:
        self.rng = random.Random(seed)
        self.design = design
        self.fake = fake
        self.hazards = hazards
        self.mapping = mapping
        self.stream = StreamOfTable(self.rng, hazards)
        self.discarded: list[Discarded] = []
        self.invocations = 0
        self.failures_injected = 0
        self.now = 0.0

    # ---------------------------------------------------------------- delivery of one shard

    def _window_of(self, record: dict[str, Any]) -> int:
        width = self.mapping.tumbling_window_seconds or 1
        return int(record["created"] // width) * width  # window-boundaries

    def _next_batch(self, lane: Lane) -> tuple[int, int] | None:
        records = lane.shard.records
        if lane.retry_queue:
            return lane.retry_queue[0]
        if lane.checkpoint >= len(records):
            return None
        end = min(len(records), lane.checkpoint + self.rng.randint(1, self.mapping.batch_size))
        if self.mapping.tumbling_window_seconds:
            window = self._window_of(records[lane.checkpoint])
            while end > lane.checkpoint + 1 and self._window_of(records[end - 1]) != window:
                end -= 1
        return lane.checkpoint, end

    def _event(self, lane: Lane, start: int, end: int, final: bool) -> dict[str, Any]:
        records = [record["event"] for record in lane.shard.records[start:end]]
        event: dict[str, Any] = {"Records": records}
        if self.mapping.tumbling_window_seconds:
            width = self.mapping.tumbling_window_seconds
            window_start = lane.window_start if lane.window_start is not None else 0
            event.update(
                {
                    "window": {"start": _iso(window_start), "end": _iso(window_start + width)},
                    "state": dict(lane.state or {}),
                    "shardId": lane.shard.shard_id,
                    "eventSourceARN": self.stream.stream_arn,
                    "isFinalInvokeForWindow": final,
                    "isWindowTerminatedEarly": False,
                }
            )
        return event

    def _invoke(self, event: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        """One invocation under a randomly chosen fault; returns (succeeded as Lambda sees it, response)."""
        self.invocations += 1
        fault = "none"
        if self.hazards.function_failures:
            fault = self.rng.choices(
                ["none", "killed", "lost_response", "throttled", "deadline", "late_write"],
                weights=[60, 10, 8, 8, 6, 8 if self.hazards.late_writes else 0],
            )[0]
        if fault != "none":
            self.failures_injected += 1
        remaining = 60_000
        if fault == "killed":
            self.fake.kill_after_writes = self.fake.writes + self.rng.randint(0, 3)
        elif fault == "throttled":
            songs = {f"song{self.rng.randint(1, 6)}"}
            self.fake.throttle = lambda parameters: parameters["Key"]["songID"]["S"] in songs
        elif fault == "deadline":
            remaining = 0
        elif fault == "late_write":
            self.fake.delay_write = lambda _parameters: self.rng.random() < 0.3
        try:
            response = self.design.invoke(event, lambda: remaining)
            succeeded = fault not in ("killed", "lost_response")  # at-least-once: done, yet retried
        except Exception:
            response, succeeded = None, False
        finally:
            self.fake.kill_after_writes = None
            self.fake.throttle = None
            self.fake.delay_write = None
        if self.mapping.tumbling_window_seconds and succeeded:
            if not isinstance(response, dict) or not isinstance(response.get("state"), dict):
                succeeded = False  # window-state: a response without state is a failed invocation
            elif response.get("batchItemFailures"):
                succeeded = False  # AWS documents no checkpoint for a partial response with a state
        return succeeded, response

    def _give_up(self, lane: Lane, sequences: list[int]) -> bool:
        """retries / window-retries: past the quota the records are discarded to the on-failure destination."""
        quota = self.mapping.maximum_retry_attempts
        if quota is None or lane.attempts <= quota:
            return False
        self.discarded.append(Discarded(lane.shard.shard_id, sequences, lane.window_start))
        lane.attempts = 0
        return True

    def _window_ended(self, lane: Lane) -> bool:
        """window-final / window-resharding: a later record, the shard's end, or the clock closes the window."""
        records = lane.shard.records
        width = self.mapping.tumbling_window_seconds or 0
        if lane.checkpoint < len(records):
            return self._window_of(records[lane.checkpoint]) != lane.window_start
        return lane.shard.closed or (lane.window_start or 0) + width <= self.now

    def _step_window(self, lane: Lane) -> None:
        records = lane.shard.records
        if lane.final_pending:
            start, end = lane.final_records or (lane.checkpoint, lane.checkpoint)
            succeeded, _ = self._invoke(self._event(lane, start, end, final=True))
            if succeeded:
                lane.checkpoint = max(lane.checkpoint, end)
                lane.close_window()
                return
            lane.attempts += 1  # window-final: nothing else of the shard until the final invocation succeeds
            window = [r["sequence"] for r in records[lane.window_first : max(lane.checkpoint, end)]]
            if self._give_up(lane, window):
                lane.checkpoint = max(lane.checkpoint, end)
                lane.close_window()
            return
        if not lane.retry_queue and lane.window_start is not None and self._window_ended(lane):
            lane.final_pending, lane.final_records = True, None
            return
        batch = self._next_batch(lane)
        if batch is None:
            if lane.shard.closed and lane.window_start is None:
                lane.done = True
            return
        start, end = batch
        if lane.window_start is None:
            lane.window_start, lane.window_first, lane.state = self._window_of(records[start]), start, {}
        last_of_window = end == len(records) and lane.shard.closed
        if (
            last_of_window
            and not lane.retry_queue
            and self.hazards.final_invocation_with_records
            and self.rng.random() < 0.5
        ):
            # AWS does not say whether a final invocation carries records: sometimes it does here
            lane.final_pending, lane.final_records = True, (start, end)
            return
        succeeded, response = self._invoke(self._event(lane, start, end, final=False))
        if succeeded:
            lane.state = dict((response or {})["state"])
            lane.checkpoint = end
            lane.attempts = 0
            if lane.retry_queue:
                lane.retry_queue.pop(0)
            return
        self._after_failure(lane, start, end)

    def _after_failure(self, lane: Lane, start: int, end: int) -> None:
        lane.attempts += 1
        if lane.retry_queue:
            lane.retry_queue.pop(0)
        if self._give_up(lane, [r["sequence"] for r in lane.shard.records[start:end]]):
            lane.checkpoint = max(lane.checkpoint, end)
            lane.retry_queue = [batch for batch in lane.retry_queue if batch[0] >= end]
            return
        if self.mapping.bisect_batch_on_function_error and end - start > 1:
            middle = (start + end) // 2
            lane.retry_queue[0:0] = [(start, middle), (middle, end)]  # bisect: not counted towards the quota
        else:
            lane.retry_queue.insert(0, (start, end))

    def _step_plain(self, lane: Lane) -> None:
        batch = self._next_batch(lane)
        if batch is None:
            if lane.shard.closed:
                lane.done = True
            return
        if not lane.retry_queue and self.hazards.parallelization_factor > 1:
            self._concurrent_batches(lane, batch)
            return
        start, end = batch
        succeeded, response = self._invoke(self._event(lane, start, end, final=False))
        if not succeeded:
            self._after_failure(lane, start, end)
            return
        lane.attempts = 0
        reported = [int(failure["itemIdentifier"]) for failure in (response or {}).get("batchItemFailures") or []]
        if reported and self.design.reports_batch_item_failures:
            # partial-batch: the checkpoint is the lowest reported record; everything from it is retried
            lowest = min(reported)
            lane.checkpoint = next(i for i in range(start, end) if lane.shard.records[i]["sequence"] == lowest)
            lane.retry_queue.clear()
            return
        if lane.retry_queue:
            lane.retry_queue.pop(0)
        lane.checkpoint = end

    def _concurrent_batches(self, lane: Lane, first: tuple[int, int]) -> None:
        """parallelization: several batches of one shard in flight; any order, as no item has two records here."""
        batches, cursor = [first], first[1]
        for _ in range(self.hazards.parallelization_factor - 1):
            if cursor >= len(lane.shard.records):
                break
            following = (cursor, min(len(lane.shard.records), cursor + self.rng.randint(1, self.mapping.batch_size)))
            batches.append(following)
            cursor = following[1]
        self.rng.shuffle(batches)
        for start, end in batches:
            for _ in range(1000):
                succeeded, response = self._invoke(self._event(lane, start, end, final=False))
                if succeeded and not (response or {}).get("batchItemFailures"):
                    break
        lane.checkpoint = cursor

    # ---------------------------------------------------------------- the history

    def _runnable(self, lanes: dict[str, Lane]) -> list[Lane]:
        result = []
        for lane in lanes.values():
            if lane.done:
                continue
            parent = lanes.get(lane.shard.parent_id) if lane.shard.parent_id else None
            if parent is not None and not parent.done:
                continue  # parent-before-child
            result.append(lane)
        return result

    def run(
        self, downloads: list[Written], hot_songs: set[str] | None = None, max_steps: int = 200_000
    ) -> HistoryResult:
        self.stream.hot_songs = set(hot_songs or ({"song1"} if self.hazards.split_for_heat else set()))
        lanes: dict[str, Lane] = {}
        pending_writes = list(downloads)
        for _ in range(max_steps):
            if pending_writes and (self.rng.random() < 0.6 or not self._runnable(lanes)):
                for _ in range(self.rng.randint(1, 8)):
                    if pending_writes:
                        written = pending_writes.pop(0)
                        self.stream.write(written)
                        self.now = written.created
                if not pending_writes:
                    self.stream.end()
            for shard_id, shard in self.stream.shards.items():
                lanes.setdefault(shard_id, Lane(shard))
            runnable = self._runnable(lanes)
            if not runnable:
                if not pending_writes:
                    break
                continue
            lane = self.rng.choice(runnable)
            if self.mapping.tumbling_window_seconds:
                self._step_window(lane)
            else:
                self._step_plain(lane)
            if self.fake.delayed and self.rng.random() < 0.2:
                self.fake.land_delayed(lambda size: self.rng.randrange(size))
        else:
            raise AssertionError("the history did not finish: a shard is stuck")
        self.fake.land_delayed()
        truth = Counter((d.song_id, utc_month(d.timestamp)) for d in downloads)
        counted = {key: self.fake.count_of("model-downloads", *key) for key in truth}
        return HistoryResult(
            design=self.design.name,
            downloads=len(downloads),
            counted=counted | self._counted_elsewhere(truth),
            truth=truth,
            discarded=self.discarded,
            invocations=self.invocations,
            failures_injected=self.failures_injected,
            writes=self.fake.writes,
        )

    def _counted_elsewhere(self, truth: Counter[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """Aggregates the oracle did not expect (a month filed wrongly) count as over-counted downloads."""
        result = {}
        for (table, key), item in self.fake.items.items():
            entry = dict(key)
            aggregate = (entry.get("songID", ""), entry.get("SK", ""))
            if table == "model-downloads" and aggregate not in truth and "DownloadCount" in item:
                result[aggregate] = int(item["DownloadCount"]["N"])
        return result


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
