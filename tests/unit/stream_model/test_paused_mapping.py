"""A mapping paused past the stream's retention, across one to three rollovers: every download counted or reported.

`UpdateEventSourceMapping` pauses invocation "and resume[s] later from the same location"; past
24 hours the shards it stopped in are deleted ("Shards are ephemeral"), and nothing says the
mapping reports what it could no longer read. Played on the stream model (tests/stream_model),
against the shipped aggregator and against the design it replaced, which drained one parent only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.stream_model import naive_designs as naive
from tests.stream_model.designs import shipped
from tests.stream_model.histories import Config, Deliver, History, Pause, Reshard, Wait, Write, play

ONE_LEVEL = naive.factory(naive.OneLevelOfAncestry)


def paused(rollovers: int, hours: int, early: bool = False, writes_after: bool = True, sweeps: int = 0) -> History:
    """Shard G counted in part, the mapping paused across `rollovers` rollovers `hours` apart (with `sweeps`
    scheduled invocations early in each wait), then fresh writes, unless not `writes_after`."""
    return History(
        Config(songs=1, timestamps=1, maximum_record_age=None),
        (
            Write(),
            Write(),
            Write(),
            Deliver(size=3),
            Write(),
            Pause(rollovers=rollovers, hours=hours, early=early, writes_after=writes_after, sweeps=sweeps),
            *((Write(), Write()) if writes_after else ()),
        ),
    )


@pytest.mark.parametrize("early", [False, True], ids=["fresh newest shard", "early records in the newest shard"])
@pytest.mark.parametrize("rollovers", [1, 2, 3])
def test_a_pause_past_the_retention_loses_nothing_silently_and_recover_makes_it_exact(
    rollovers: int, early: bool
) -> None:
    # given a mapping paused for more than 24 hours per rollover after a shard was counted in part
    history = paused(rollovers, hours=25, early=early)
    # when the shipped aggregator plays it, then recover answers the failure queue
    outcome = play(history, shipped)
    # then downloads were lost from the stream, every one of them is reported, and recover makes the counts exact
    assert "mapping paused past the retention" in outcome.hazards
    assert outcome.lost_before > 0
    assert outcome.uncovered == 0, outcome.summary()
    assert outcome.problems() == [], outcome.summary()


def test_an_ancestor_still_listed_but_never_read_is_read_and_one_deleted_above_it_is_reported() -> None:
    # given three rollovers 13 hours apart: the newest shard's parent is still listed, its grandparent deleted
    outcome = play(paused(3, hours=13, early=False), shipped)
    # then what the stream still holds is counted and the rest reported: exact after recover
    assert outcome.uncovered == 0, outcome.summary()
    assert outcome.problems() == [], outcome.summary()


def test_a_short_pause_is_counted_whole_without_a_report() -> None:
    # given a pause of two rollovers two hours apart: nothing trimmed, nothing deleted
    outcome = play(paused(2, hours=2, early=True), shipped)
    # then everything is counted before any recover, and nothing is reported
    assert outcome.lost_before == 0, outcome.summary()
    assert outcome.failure_records == 0, outcome.summary()
    assert outcome.problems() == []


@pytest.mark.parametrize("rollovers", [2, 3])
def test_draining_one_level_of_parent_loses_a_shard_deleted_unread_without_a_report(rollovers: int) -> None:
    # given the same pause across two or three rollovers
    history = paused(rollovers, hours=25, early=False)
    # when the design that drains one parent level plays it
    outcome = play(history, ONE_LEVEL)
    # then downloads are lost and no durable record says so
    assert outcome.uncovered > 0, outcome.summary()
    assert any("lost without a durable failure record" in problem for problem in outcome.problems())


def test_draining_one_level_of_parent_survives_a_single_rollover() -> None:
    # given a pause across one rollover: the deleted shard is the one the aggregator read in part
    outcome = play(paused(1, hours=25, early=False), ONE_LEVEL)
    # then even the one-level design reports it (the parent's read fails as gone): the naive design's blind spot is
    # a shard it never saw
    assert outcome.uncovered == 0, outcome.summary()


def test_a_lineage_that_gets_no_download_after_the_pause_is_reported_by_an_invocation_of_another() -> None:
    # given downloads in both partitions (song4 hashes to the other one), one counted in part, then a pause across
    # two rollovers after which only song1's partition is written again
    history = History(
        Config(songs=4, timestamps=1, maximum_record_age=None),
        (
            Write(song=1),
            Write(song=4),
            Write(song=4),
            Deliver(size=1),
            Write(song=4),
            Pause(rollovers=2, hours=25, writes_after=False),
            Write(song=1),
        ),
    )
    # when the shipped aggregator plays it
    outcome = play(history, shipped)
    # then song4's lineage, never invoked again, is reported all the same, and recover makes it exact
    assert outcome.lost_before > 0
    assert outcome.uncovered == 0, outcome.summary()
    assert outcome.problems() == [], outcome.summary()


def _unscheduled(env: Any, config: Config) -> Any:
    """The shipped aggregator without its schedule: only the mapping invokes it."""
    design = shipped(env, config)
    design.sweeps_on_schedule = False
    return design


def test_a_pause_past_the_retention_followed_by_no_download_at_all_is_reported_by_the_schedule() -> None:
    # given a shard counted in part, then a pause across two rollovers, then no download ever again
    history = paused(2, hours=25, writes_after=False)
    # when the shipped aggregator plays it with its schedule, and again with the mapping alone invoking it
    scheduled, unscheduled = play(history, shipped), play(history, _unscheduled)
    # then the schedule's invocation reports the loss durably, and recover makes it exact
    assert scheduled.lost_before > 0
    assert scheduled.uncovered == 0, scheduled.summary()
    assert scheduled.problems() == [], scheduled.summary()
    # and without it nothing is ever invoked: the loss stays silent
    assert unscheduled.uncovered > 0, unscheduled.summary()


def test_scheduled_sweeps_during_a_pause_count_the_closed_shards_before_the_stream_deletes_them() -> None:
    # given the same pause with two scheduled invocations early in each wait (the last of them twice), and with none
    # when the shipped aggregator plays both
    swept, not_swept = (
        play(paused(2, hours=25, writes_after=False, sweeps=2), shipped),
        play(paused(2, hours=25, writes_after=False), shipped),
    )
    # then the sweeps read each closed shard while the stream held it: nothing was lost, nothing needs recover
    assert (swept.lost_before, swept.over_before) == (0, 0), swept.summary()
    assert swept.problems() == [], swept.summary()
    # and without them the same pause loses records, reported: recover makes it exact
    assert not_swept.lost_before > 0, not_swept.summary()
    assert not_swept.uncovered == 0, not_swept.summary()
    assert not_swept.problems() == [], not_swept.summary()


def test_records_trimmed_from_a_shard_still_open_when_no_download_comes_are_reported_by_the_schedule() -> None:
    # given one download counted, then a pause of 25 hours with one rollover: four downloads land in the new shard,
    # still open, right after it; the schedule sweeps twice early in the wait; no download after the pause
    history = History(
        Config(songs=1, timestamps=1, maximum_record_age=None),
        (Write(), Deliver(size=1), Pause(rollovers=1, hours=25, early=True, writes_after=False, sweeps=2)),
    )
    # when the shipped aggregator plays it
    outcome = play(history, shipped)
    # then the records the stream trimmed from the open shard are reported (nothing else would read it), and
    # recover makes every count exact
    assert outcome.lost_before > 0, outcome.summary()
    assert outcome.uncovered == 0, outcome.summary()
    assert outcome.problems() == [], outcome.summary()


def _fresh_instance_per_sweep(env: Any, config: Config) -> Any:
    """The shipped aggregator, each scheduled invocation on a new function instance: nothing of the last one kept."""
    design = shipped(env, config)
    invoke = design.invoke

    def on_a_new_instance(event: dict[str, Any], remaining_ms: Any) -> Any:
        if "lineageSweep" in event:
            design.restart()
        return invoke(event, remaining_ms)

    design.invoke = on_a_new_instance
    return design


def test_scheduled_sweeps_on_new_instances_each_still_count_the_closed_shards_of_a_pause() -> None:
    # given the same pause with two scheduled invocations early in each wait, each on a new function instance
    history = paused(2, hours=25, writes_after=False, sweeps=2)
    # when the shipped aggregator plays it
    outcome = play(history, _fresh_instance_per_sweep)
    # then the progress table, not the instance, remembered which closed shards were still unread: nothing lost
    assert (outcome.lost_before, outcome.over_before) == (0, 0), outcome.summary()
    assert outcome.problems() == [], outcome.summary()


@dataclass
class _Wired:
    """The shipped aggregator on the model's DynamoDB and a given streams client, with a failure queue that takes
    messages only while `queue_up`."""

    progress: Any
    settings: Any
    deps: Any
    sent: list[dict[str, object]] = field(default_factory=list)
    queue_up: bool = False


def _aggregator_on(streams: object) -> _Wired:
    from aggregate_store import AggregateStore
    from aggregator_settings import GUIDE_SCHEMA, Settings
    from dependencies import Dependencies
    from shard_progress import ProgressStore
    from tests.stream_model.designs import InlineExecutor
    from tests.stream_model.environment import PROGRESS_TABLE, TABLE, TABLE_ARN
    from tests.stream_model.fake_dynamodb import FakeDynamoDB

    dynamodb = FakeDynamoDB()
    progress = ProgressStore(dynamodb, PROGRESS_TABLE)
    settings = Settings(TABLE, TABLE_ARN, PROGRESS_TABLE, GUIDE_SCHEMA, 1, "q", "per_batch", 1, 1000)
    wired = _Wired(progress, settings, None)

    def send(messages: list[dict[str, object]]) -> bool:
        wired.sent.extend(messages if wired.queue_up else [])
        return wired.queue_up

    wired.deps = Dependencies(
        store=AggregateStore(dynamodb, TABLE, settings.schema, progress),
        progress=progress,
        streams=streams,
        executor=InlineExecutor(),
        send_failures=send,
    )
    return wired


class _TrimmedClosedParent:
    """A stream of two shards: P, closed, counted through 200 and every later record trimmed; its child C, empty."""

    def describe_stream(self, **_: object) -> dict[str, object]:
        return {
            "StreamDescription": {
                "Shards": [
                    {"ShardId": "shardP", "SequenceNumberRange": {"StartingSequenceNumber": "100"}},
                    {
                        "ShardId": "shardC",
                        "ParentShardId": "shardP",
                        "SequenceNumberRange": {"StartingSequenceNumber": "500"},
                    },
                ]
            }
        }

    def get_shard_iterator(self, **parameters: str) -> dict[str, str]:
        if parameters["ShardId"] == "shardP" and parameters["ShardIteratorType"] != "TRIM_HORIZON":
            raise ClientError({"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}}, "Get")
        return {"ShardIterator": parameters["ShardId"]}

    def get_records(self, **parameters: str) -> dict[str, object]:
        if parameters["ShardIterator"] == "shardP":
            return {"Records": []}  # closed, nothing left to read: NextShardIterator null
        return {"Records": [], "NextShardIterator": "shardC"}


def test_a_trimmed_ancestor_whose_report_the_queue_refused_is_reported_again_not_ended() -> None:
    # given a closed parent counted through 200 whose later records were trimmed, and a failure queue that refuses
    import two_readers
    from delivery import ShardRef, parse_delivery
    from invocation_context import InvocationContext
    from tests.stream_model.environment import STREAM_ARN, TABLE_ARN

    wired = _aggregator_on(_TrimmedClosedParent())
    progress = wired.progress
    parent, child = ShardRef(STREAM_ARN, "shardP"), ShardRef(STREAM_ARN, "shardC")
    progress.first_seen(parent, "100", None, lineage_counted=True)
    progress.advance(parent, "200".zfill(40), "200", None, False)
    event = {"shardId": "shardC", "eventSourceARN": STREAM_ARN, "Records": [], "throughSequenceNumber": "500"}
    # when the child is invoked while the queue refuses, then again once it takes messages
    two_readers.process_delivery(
        parse_delivery(event, TABLE_ARN), InvocationContext(wired.settings, wired.deps, lambda: 60_000)
    )
    refused_then = (progress.read(parent).ended, progress.read(child).lineage_counted)
    wired.queue_up = True
    two_readers.process_delivery(
        parse_delivery(event, TABLE_ARN), InvocationContext(wired.settings, wired.deps, lambda: 60_000)
    )
    # then the parent stayed open until its gap was in the queue, and the gap is there now
    assert refused_then == (False, False)
    assert [message["shardId"] for message in wired.sent if message.get("kind") == "records_trimmed"] == ["shardP"]
    assert progress.read(parent).ended
    assert progress.read(child).lineage_counted


def test_a_lineage_quiet_for_a_day_in_a_busy_table_raises_no_report() -> None:
    # given song4's partition counted, its shard rolled over, then a day in which only song1's partition is written
    settle = [Deliver(size=10), Deliver(lane=1, size=10), Wait(seconds=10), Deliver(), Deliver(lane=1)] * 2
    busy_day = [step for _ in range(7) for step in (Wait(seconds=4 * 3600), Write(song=1), *settle)]
    history = History(
        Config(songs=4, timestamps=1),
        (Write(song=1), Write(song=4), *settle, Reshard(lane=1), *settle, *busy_day, Write(song=1), *settle),
    )
    # when the shipped aggregator plays it (the quiet shard is deleted a day after it closed)
    outcome = play(history, shipped)
    # then nothing was lost and nothing is reported: the quiet shard was read to its end while it was still listed
    assert (outcome.lost_before, outcome.failure_records) == (0, 0), outcome.summary()
    assert "rollover" in outcome.hazards


class _ChildOfADeletedShard:
    """A stream listing one open shard C whose parent P is deleted: C has never been invoked."""

    def describe_stream(self, **_: object) -> dict[str, object]:
        shard = {
            "ShardId": "shardC",
            "ParentShardId": "shardP",
            "SequenceNumberRange": {"StartingSequenceNumber": "500"},
        }
        return {"StreamDescription": {"Shards": [shard]}}

    def get_shard_iterator(self, **_: str) -> dict[str, str]:
        return {"ShardIterator": "shardC"}

    def get_records(self, **_: str) -> dict[str, object]:
        return {"Records": [], "NextShardIterator": "shardC"}  # open, and nothing in it yet


def test_a_scheduled_sweep_whose_loss_report_the_queue_refused_fails_and_its_retry_reports_it() -> None:
    # given a stream whose only listed shard descends from a deleted shard, and a failure queue that refuses at first
    from delivery import ShardRef
    from invocation_context import InvocationContext
    from lineage_sweep import LineageSweepUnreported, sweep_lineages_on_schedule
    from tests.stream_model.environment import STREAM_ARN

    wired = _aggregator_on(_ChildOfADeletedShard())
    event = {"lineageSweep": {"streamArn": STREAM_ARN}}
    # when the schedule invokes the aggregator while the queue refuses, and Lambda retries once the queue takes messages
    with pytest.raises(LineageSweepUnreported) as refused:
        sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))
    wired.queue_up = True
    response, _ = sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))
    # then the first failed, saying why, the retry reported the lost ancestor, and the lineage is settled
    assert refused.value.report.unreported == 1
    assert [(m["kind"], m["shardId"], m.get("lostAncestorOf")) for m in wired.sent] == [
        ("records_trimmed", "shardP", "shardC")
    ]
    assert response["finished"] is True
    assert wired.progress.read(ShardRef(STREAM_ARN, "shardC")).lineage_counted


@pytest.mark.parametrize(
    "event",
    [
        {"lineageSweep": {"streamArn": "arn:aws:dynamodb:us-east-1:000000000000:table/other/stream/2018"}},
        {"lineageSweep": {}},
        {"lineageSweep": {"streamArn": 7}},
    ],
    ids=["another table's stream", "no stream", "not a string"],
)
def test_a_scheduled_sweep_of_no_stream_of_the_table_is_refused_and_reads_nothing(event: dict[str, object]) -> None:
    from invocation_context import InvocationContext
    from lineage_sweep import sweep_lineages_on_schedule

    # given an aggregator whose stream client fails any call
    wired = _aggregator_on(None)
    # when the schedule's event names no stream of the table
    # then the aggregator says so before any call (one on a stream client of None would raise AttributeError)
    with pytest.raises(ValueError, match="not a stream of"):
        sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))


class _IdleOpenShard:
    """One open shard S whose counted record 200 aged past the retention; nothing written after it, until `write`."""

    def __init__(self) -> None:
        self.new_records: list[dict[str, object]] = []

    def describe_stream(self, **_: object) -> dict[str, object]:
        shard = {"ShardId": "shardS", "SequenceNumberRange": {"StartingSequenceNumber": "100"}}
        return {"StreamDescription": {"Shards": [shard]}}

    def get_shard_iterator(self, **parameters: str) -> dict[str, str]:
        if parameters["ShardIteratorType"] != "TRIM_HORIZON":
            # "You request a shard iterator with a sequence number older than the trim point (24 hours)."
            raise ClientError({"Error": {"Code": "TrimmedDataAccessException", "Message": "trimmed"}}, "Get")
        return {"ShardIterator": "0"}

    def get_records(self, **parameters: str) -> dict[str, object]:
        position = int(parameters["ShardIterator"])
        return {"Records": self.new_records[position:], "NextShardIterator": str(len(self.new_records))}


def test_an_idle_open_shard_whose_checkpoint_aged_past_the_retention_is_reported_once_not_at_every_sweep() -> None:
    # given an open shard counted through record 200, which the stream has trimmed since, and nothing after it
    from delivery import ShardRef
    from invocation_context import InvocationContext
    from lineage_sweep import sweep_lineages_on_schedule
    from tests.stream_model.environment import STREAM_ARN
    from tests.streams import download_record

    stream = _IdleOpenShard()
    wired = _aggregator_on(stream)
    wired.queue_up = True
    shard = ShardRef(STREAM_ARN, "shardS")
    wired.progress.first_seen(shard, "100", None, lineage_counted=True)
    wired.progress.advance(shard, "200".zfill(40), "200", None, False)
    event = {"lineageSweep": {"streamArn": STREAM_ARN}}
    # when the schedule sweeps four times, then a download lands in the shard and it sweeps again
    for _ in range(4):
        sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))
    reports_while_idle = [(m["kind"], m["checkpoint"], m["firstReadableSequence"]) for m in wired.sent]
    stream.new_records.append(download_record("900", "song1", download_id="d1"))
    sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))
    # then the possible gap was reported once while the shard stayed idle (recover recounts: never a loss)
    assert reports_while_idle == [("records_trimmed", "200", None)]
    # and the new download was read and counted at once, its possible gap reported with its end
    assert [(m["checkpoint"], int(m["firstReadableSequence"])) for m in wired.sent[1:]] == [("200", 900)]
    assert wired.progress.read(shard).checkpoint == "900".zfill(40)


class _ManyOpenShards:
    """Ten listed open shards, nothing trimmed: every sweep probes each."""

    def __init__(self) -> None:
        self.probed: list[str] = []

    def describe_stream(self, **_: object) -> dict[str, object]:
        shards = [
            {"ShardId": f"shard{n}", "SequenceNumberRange": {"StartingSequenceNumber": f"{100 * (n + 1)}"}}
            for n in range(10)
        ]
        return {"StreamDescription": {"Shards": shards}}

    def get_shard_iterator(self, **parameters: str) -> dict[str, str]:
        self.probed.append(parameters["ShardId"])
        return {"ShardIterator": parameters["ShardId"]}

    def get_records(self, **parameters: str) -> dict[str, object]:
        return {"Records": [], "NextShardIterator": parameters["ShardIterator"]}


def test_a_sweep_cut_short_by_its_budget_is_taken_up_where_it_stopped_by_the_next_on_any_instance() -> None:
    # given ten open shards, and sweeps whose time runs out after four shards, each on a new function instance
    from invocation_context import InvocationContext
    from lineage_sweep import sweep_lineages_on_schedule
    from tests.stream_model.environment import STREAM_ARN

    stream = _ManyOpenShards()
    event = {"lineageSweep": {"streamArn": STREAM_ARN}}
    wired = _aggregator_on(stream)
    finished = []
    for _ in range(3):
        fresh = _aggregator_on(stream)
        fresh.deps.progress = wired.deps.progress  # a new instance, the same progress table
        probed_before = len(stream.probed)

        def remaining_ms(before: int = probed_before) -> int:
            return 60_000 if len(stream.probed) - before < 4 else 0  # out of time after four shards

        response, _ = sweep_lineages_on_schedule(event, InvocationContext(wired.settings, fresh.deps, remaining_ms))
        finished.append(response["finished"])
    # then the three sweeps together reached every shard, none starting over from the first
    assert finished == [False, False, False]
    assert set(stream.probed) == {f"shard{n}" for n in range(10)}


class _OneShardFailing(_ManyOpenShards):
    """The same ten open shards; GetShardIterator of shard2 is throttled every time."""

    def get_shard_iterator(self, **parameters: str) -> dict[str, str]:
        if parameters["ShardId"] == "shard2":
            raise ClientError({"Error": {"Code": "LimitExceededException", "Message": "slow down"}}, "Get")
        return super().get_shard_iterator(**parameters)


def test_a_shard_that_keeps_failing_does_not_stall_the_sweeps_behind_it() -> None:
    # given ten open shards, one of which fails every read
    from invocation_context import InvocationContext
    from lineage_sweep import sweep_lineages_on_schedule
    from tests.stream_model.environment import STREAM_ARN

    stream = _OneShardFailing()
    wired = _aggregator_on(stream)
    event = {"lineageSweep": {"streamArn": STREAM_ARN}}
    # when the schedule sweeps twice
    answers = [
        sweep_lineages_on_schedule(event, InvocationContext(wired.settings, wired.deps, lambda: 60_000))[0]["finished"]
        for _ in range(2)
    ]
    # then each sweep ended at the failing shard and said so, and the second went on past it to every other shard
    assert answers == [False, False]
    assert set(stream.probed) == {f"shard{n}" for n in range(10) if n != 2}
