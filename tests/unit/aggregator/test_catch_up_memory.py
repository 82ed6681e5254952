"""A lagging checkpoint is caught up in bounded steps: one invocation's memory does not grow with the backlog.

The shipped `process_delivery`, on the stream model's DynamoDB and a stream made on demand
(`leaderboard_dev.backlog_stream.BacklogStream`), asked to count through the end of a backlog
of 100,000 downloads of 4 KB (400 MB of records; the function has 512 MB by default).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

import two_readers
from aggregator_settings import MEMORY_SIZE_VARIABLE, Settings, read_budget
from invocation_context import InvocationContext
from leaderboard_dev.backlog_stream import BacklogStream, backlog_invocation, catch_up, catch_up_alone
from leaderboard_tools.size.sizing import AGGREGATOR_MEMORY_MB, WINDOW_SECONDS_DEFAULT
from tests.stream_model.fake_dynamodb import FakeDynamoDB

TABLE, PROGRESS_TABLE = "memory-downloads", "memory-progress"


def january_counts(dynamodb: FakeDynamoDB) -> dict[str, int]:
    """The month's aggregates as stored: the backlog's downloads are all of January 2018."""
    return {
        item["songID"]["S"]: int(item["DownloadCount"]["N"])
        for (table, _), item in dynamodb.items.items()
        if table == TABLE and item.get("Month", {}).get("S") == "2018-01"
    }


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
def test_an_invocation_catching_up_100000_records_of_4_kb_in_steps_peaks_under_256_mib() -> None:
    # given a shard whose checkpoint lags 100,000 downloads of 4 KB (400 MB) behind the bound
    stream = BacklogStream(records=100_000, item_bytes=4096)
    # when the aggregator is invoked through the backlog's end, with time enough to read it all, in a process of its own
    (invocation,), stream = catch_up_alone("two_readers", FakeDynamoDB, stream, 2, TABLE, PROGRESS_TABLE)
    # then that one invocation reads the whole backlog in several steps and peaks under 256 MiB resident
    assert invocation.caught_up
    assert invocation.records_read == 100_000
    assert stream.iterators > 1
    assert invocation.peak_mib < 256, invocation


def test_an_invocation_short_of_time_reads_a_bounded_step_and_the_next_goes_on_from_its_checkpoint() -> None:
    # given a shard whose checkpoint lags 100,000 downloads of 4 KB behind the bound
    stream = BacklogStream(records=100_000, item_bytes=4096)
    # when each invocation has time for ten pages of the stream only
    first, second = catch_up(two_readers, FakeDynamoDB(), stream, 2, TABLE, PROGRESS_TABLE, pages_per_invocation=10)
    # then each reads a bounded step, moves the checkpoint on, and is not caught up
    assert 0 < first.records_read < 100_000
    assert second.records_read > 0
    assert first.checkpoint_after is not None
    assert second.checkpoint_after is not None
    assert second.checkpoint_after > first.checkpoint_after
    assert not first.caught_up


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
def test_a_backlog_of_several_read_budgets_drains_in_one_invocation_each_step_exact() -> None:
    # given a backlog several read budgets long
    records = Settings.read_budget_records * 2 + 777
    stream, dynamodb = BacklogStream(records=records, item_bytes=100, songs=7), FakeDynamoDB()
    # when the aggregator is invoked through its end
    invocations = list(catch_up(two_readers, dynamodb, stream, 10, TABLE, PROGRESS_TABLE))
    # then one invocation read it (in steps of at most a budget and a page), and every download is counted once
    assert len(invocations) == 1
    assert invocations[0].caught_up
    assert invocations[0].downloads == records
    assert january_counts(dynamodb) == dict(Counter(f"song-{index % 7:04d}" for index in range(records)))


def test_the_read_budget_and_memory_ceiling_grow_with_the_functions_memory_and_are_the_defaults_without_it() -> None:
    # given the memory Lambda names in the function's environment
    at = {memory: read_budget({MEMORY_SIZE_VARIABLE: str(memory)}) for memory in (128, 512, 1024)}
    # then a step reads 128 records and 64 KiB of stream records per MB, and no page once the process holds 60 % of
    # the memory; the defaults where no memory is named
    for memory in (128, 512, 1024):
        assert at[memory] == {
            "read_budget_records": memory * 128,
            "read_budget_bytes": memory * 64 * 2**10,
            "memory_ceiling_bytes": int(memory * 2**20 * 0.6),
        }
    assert at[512]["read_budget_records"] == 65_536
    assert at[512]["read_budget_bytes"] == 32 * 2**20
    assert read_budget({}) == {}
    assert read_budget({MEMORY_SIZE_VARIABLE: "lots"}) == {}
    environ = {"TABLE_NAME": "t", "TABLE_ARN": "arn", "PROGRESS_TABLE_NAME": "p", MEMORY_SIZE_VARIABLE: "512"}
    assert Settings.from_environment(environ).read_budget_records == 65_536


def test_a_function_of_the_default_memory_reads_a_default_window_at_1000_downloads_a_second_in_one_step() -> None:
    # given the module's default memory and tumbling window, and 1,000 downloads a second of 100 B
    budget = read_budget({MEMORY_SIZE_VARIABLE: str(AGGREGATOR_MEMORY_MB)})
    window_records = WINDOW_SECONDS_DEFAULT * 1000
    # then one step holds the whole window: per_window writes each aggregate once per window, not once per step
    assert budget["read_budget_records"] >= window_records
    assert budget["read_budget_bytes"] >= window_records * 300


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
@pytest.mark.parametrize("item_bytes", [100, 4096])
def test_a_512_mb_function_catching_up_a_backlog_of_two_steps_peaks_under_half_its_memory(item_bytes: int) -> None:
    # given a 512 MB function whose shard lags two read budgets (records or bytes, whichever binds) behind the bound
    budget = read_budget({MEMORY_SIZE_VARIABLE: "512"})
    records = min(budget["read_budget_records"], budget["read_budget_bytes"] // item_bytes) * 2
    stream = BacklogStream(records=records, item_bytes=item_bytes)
    # when the aggregator is invoked through the backlog's end, in a process of its own
    (invocation,), stream = catch_up_alone("two_readers", FakeDynamoDB, stream, 2, TABLE, PROGRESS_TABLE, memory_mb=512)
    # then one invocation reads it all in steps, and peaks under 256 MiB resident
    assert invocation.caught_up
    assert invocation.records_read == records
    assert stream.iterators > 1
    assert invocation.peak_mib < 256, invocation


class WideBacklog(BacklogStream):
    """The same downloads with 20 small number attributes more (what a platform keeps beside a download: a device,
    a country, a plan, counters), each a few bytes of `SizeBytes` and a dict, two strings and a slot in Python."""

    def record(self, index: int) -> dict[str, Any]:
        record = super().record(index)
        image = record["dynamodb"]["NewImage"]
        for number in range(20):
            image[f"a{number:02d}"] = {"N": str(index % 97 + number)}
        # "The total size of an item is the sum of the lengths of its attribute names and values" (DynamoDB item
        # sizes and formats); a number's value is taken at its digits' length, the key counted once more
        keys = record["dynamodb"]["Keys"]
        record["dynamodb"]["SizeBytes"] = sum(
            len(name) + len(next(iter(value.values()))) for part in (keys, image) for name, value in part.items()
        )
        return record


@pytest.mark.slow  # a backlog of tens of thousands of records: CI runs it, make check does not
def test_a_512_mb_backlog_of_downloads_of_24_small_attributes_is_cut_into_shorter_steps_and_counted_whole() -> None:
    # given a 512 MB function whose shard lags one read budget of downloads of 24 small attributes (about 200 B of
    # SizeBytes each: the record budget binds, not the byte budget, and at about 9 KB of Python a download it would
    # hold some 580 MiB in one step)
    budget = read_budget({MEMORY_SIZE_VARIABLE: "512"})
    stream = WideBacklog(records=budget["read_budget_records"], item_bytes=100)
    assert stream.record(0)["dynamodb"]["SizeBytes"] * budget["read_budget_records"] < budget["read_budget_bytes"]
    # when the aggregator is invoked through the backlog's end, in a process of its own
    (invocation,), stream = catch_up_alone("two_readers", FakeDynamoDB, stream, 1, TABLE, PROGRESS_TABLE, memory_mb=512)
    # then the memory ceiling cut the budget's one step into several, and every download is counted
    assert invocation.caught_up
    assert invocation.records_read == budget["read_budget_records"]
    assert invocation.downloads == budget["read_budget_records"]
    assert stream.iterators > 2, "one read budget, so more than one step (and the shard facts' iterator) is the ceiling"


def test_a_process_at_its_memory_ceiling_reads_a_page_a_step_and_still_counts_the_whole_backlog_once() -> None:
    # given a backlog of 5,500 downloads, and a process already holding more than its memory ceiling
    records = 5_500
    stream, dynamodb = BacklogStream(records=records, item_bytes=100, songs=7), FakeDynamoDB()
    settings, dependencies, delivery = backlog_invocation(
        dynamodb,
        stream,
        TABLE,
        PROGRESS_TABLE,
        deadline_margin_ms=1000,
        send_failures=lambda _messages: True,
        memory_mb=512,
    )
    settings = dataclasses.replace(settings, memory_ceiling_bytes=1)
    # when the aggregator is invoked through the backlog's end
    _, report = two_readers.process_delivery(delivery, InvocationContext(settings, dependencies, lambda: 900_000))
    # then each step read one page (1,000 records) and moved on, and every download is counted once
    assert report.caught_up
    assert report.records_read == records
    assert stream.iterators >= 6  # a step (a shard iterator) per page of 1,000
    assert january_counts(dynamodb) == dict(Counter(f"song-{index % 7:04d}" for index in range(records)))
