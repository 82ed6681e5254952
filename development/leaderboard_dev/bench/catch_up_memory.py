"""Peak memory of the aggregator's invocations that catch up a lagging checkpoint, per backlog and item size.

A shard holds a backlog of downloads (the checkpoint lagged: a paused mapping, an outage, a throttled
shard) and each invocation is asked to count through its end. The shipped `process_delivery` reads
from its checkpoint in bounded steps; this measures, with tracemalloc, the peak of what one
invocation allocates (the records it reads, what it parses and writes), and how many invocations
drain the backlog. The stream and the invocations are `leaderboard_dev.backlog_stream`'s, which the unit tests
of catch-up drive too; DynamoDB here is moto.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from leaderboard_dev.backlog_stream import STREAM_ARN, BacklogStream, catch_up
from leaderboard_tools.size.sizing import AGGREGATOR_MEMORY_MB

INVOCATION_PAGES = 200
"""GetRecords pages a measured invocation has time for: several steps (at 512 MB a step is 65,536 records or
32 MiB)."""
MEMORY_MB = AGGREGATOR_MEMORY_MB
"""The function's memory measured: `aggregator_memory_size`'s default, which sets the read budget."""
BACKLOGS = (10_000, 100_000, 1_000_000)
ITEM_BYTES = (100, 1024, 4096)
MEASURED_INVOCATIONS = 3
"""Invocations measured per backlog; the rest of a backlog's drain is the same step again (stated per figure)."""


def run_catch_up_memory(
    backlogs: tuple[int, ...] = BACKLOGS, item_bytes: tuple[int, ...] = ITEM_BYTES
) -> dict[str, Any]:
    """Per backlog and item size: each measured invocation's peak memory and records read, on moto in process."""
    import os
    import sys

    import boto3
    from moto import mock_aws

    from leaderboard_dev.bench.handler_cpu import AGGREGATOR_SOURCE, PROGRESS_TABLE, TABLE, create_tables, load_module

    saved = dict(os.environ)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "TABLE_NAME": TABLE,
            "TABLE_ARN": STREAM_ARN.rsplit("/stream/", 1)[0],
            "PROGRESS_TABLE_NAME": PROGRESS_TABLE,
        }
    )
    sys.path.insert(0, str(AGGREGATOR_SOURCE))
    rows = []
    try:
        two_readers = load_module("two_readers", AGGREGATOR_SOURCE / "two_readers.py")
        from aggregator_settings import MEMORY_SIZE_VARIABLE, Settings

        settings = Settings.from_environment({**os.environ, MEMORY_SIZE_VARIABLE: str(MEMORY_MB)})
        for size in item_bytes:
            for backlog in backlogs:
                with mock_aws():
                    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
                    create_tables(dynamodb)
                    stream = BacklogStream(backlog, size)
                    measured = list(
                        catch_up(
                            two_readers,
                            dynamodb,
                            stream,
                            MEASURED_INVOCATIONS,
                            TABLE,
                            PROGRESS_TABLE,
                            INVOCATION_PAGES,
                            MEMORY_MB,
                            memory_ceiling=False,
                        )
                    )
                per_invocation = max(item.records_read for item in measured)
                rows.append(
                    {
                        "backlog_records": backlog,
                        "item_bytes": size,
                        "invocations": [asdict(item) for item in measured],
                        "peak_mib": max(item.peak_mib for item in measured),
                        "records_per_invocation": per_invocation,
                        "invocations_to_drain": math.ceil(backlog / per_invocation) if per_invocation else None,
                        "drained_in_measurement": measured[-1].caught_up,
                    }
                )
    finally:
        sys.path.remove(str(AGGREGATOR_SOURCE))
        os.environ.clear()
        os.environ.update(saved)
    return {
        "budget": {"records": settings.read_budget_records, "bytes": settings.read_budget_bytes},
        "memory_mb": MEMORY_MB,
        "measured_invocations": MEASURED_INVOCATIONS,
        "pages_per_invocation": INVOCATION_PAGES,
        "runs": rows,
    }
