"""An invocation's records are tied to one shard of this table's stream, or refused with the reason."""

from __future__ import annotations

from typing import Any

from delivery import ShardRef, parse_delivery
from tests.streams import STREAM_ARN, TABLE_ARN, download_record, window_event

OTHER_TABLE_STREAM = "arn:aws:dynamodb:us-east-1:000000000000:table/someone-else/stream/2018-01-01T00:00:00.000"


def test_a_window_event_names_its_shard_and_keeps_its_state() -> None:
    # given a tumbling-window event as the event source mapping sends it
    event = window_event([download_record(1, "song1"), download_record(2, "song2")], state={"v": 1}, final=False)
    # when it is parsed
    delivery = parse_delivery(event, TABLE_ARN)
    # then it is a mapping delivery for that shard of this table's stream
    assert delivery.shard == ShardRef(STREAM_ARN, "shardId-00000000000000000001-aaaaaaaa")
    assert (delivery.is_direct, delivery.is_final, delivery.state) == (False, False, {"v": 1})
    assert len(delivery.records) == 2
    assert delivery.refused == []


def test_records_of_another_tables_stream_are_refused_and_the_rest_kept() -> None:
    foreign = download_record(2, "song1")
    foreign["eventSourceARN"] = OTHER_TABLE_STREAM
    delivery = parse_delivery(window_event([download_record(1, "song1"), foreign]), TABLE_ARN)
    assert [r["dynamodb"]["SequenceNumber"][-1] for r in delivery.records] == ["1"]
    assert [(r.raw_sequence[-1], "not from a stream of" in r.reason) for r in delivery.refused] == [("2", True)]


def test_an_event_of_another_tables_stream_is_refused_whole() -> None:
    event = window_event([download_record(1, "song1")])
    event["eventSourceARN"] = OTHER_TABLE_STREAM
    for record in event["Records"]:
        record["eventSourceARN"] = OTHER_TABLE_STREAM
    delivery = parse_delivery(event, TABLE_ARN)
    assert delivery.records == []
    assert len(delivery.refused) == 1


def test_a_record_of_another_stream_of_this_table_than_the_event_is_refused() -> None:
    older = download_record(2, "song1")
    older["eventSourceARN"] = f"{TABLE_ARN}/stream/2017-01-01T00:00:00.000"
    delivery = parse_delivery(window_event([download_record(1, "song1"), older]), TABLE_ARN)
    assert len(delivery.records) == 1
    assert "the event from" in delivery.refused[0].reason


def test_an_event_without_shard_id_refuses_every_record() -> None:
    # given a plain stream event, as a mapping without a tumbling window (or a careless caller) sends it
    event: dict[str, Any] = {"Records": [download_record(1, "song1"), download_record(2, "song2")]}
    # when it is parsed, then nothing is taken: sequence numbers mean nothing without their shard
    delivery = parse_delivery(event, TABLE_ARN)
    assert delivery.records == []
    assert delivery.shard is None
    assert [r.reason for r in delivery.refused] == [delivery.refused[0].reason] * 2
    assert "shardId" in delivery.refused[0].reason


def test_an_event_without_window_is_a_direct_invocation_and_final() -> None:
    event = {"shardId": "shardId-x", "Records": [download_record(1, "song1")]}
    delivery = parse_delivery(event, TABLE_ARN)
    assert (delivery.is_direct, delivery.is_final, delivery.shard) == (True, True, ShardRef(STREAM_ARN, "shardId-x"))


def test_garbage_is_refused_not_raised() -> None:
    assert parse_delivery("nonsense", TABLE_ARN).refused[0].reason == "event is not an object"
    assert parse_delivery({"Records": "x", "shardId": "s"}, TABLE_ARN).refused[0].reason == "Records is not a list"


def test_watermark_names_differ_per_stream_and_shard_and_are_short() -> None:
    names = {
        ShardRef(stream, shard).watermark_name
        for stream in (STREAM_ARN, f"{TABLE_ARN}/stream/2019-01-01T00:00:00.000")
        for shard in ("shardId-1", "shardId-2")
    }
    assert len(names) == 4
    assert all(name.startswith("Watermark_") and len(name) == len("Watermark_") + 16 for name in names)
