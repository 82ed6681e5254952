"""What a sized load costs a month: each request and GB-second of the module at PRICES (docs/sizing.md, "What it
costs"), from the arithmetic of sizing.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

from leaderboard_tools.size.prices import (
    LAMBDA_GB_SECOND,
    LAMBDA_REQUEST,
    READ_REQUEST_UNIT,
    SECONDS_PER_MONTH,
    STREAMS_READ_REQUEST_UNIT,
    WRITE_REQUEST_UNIT,
    Price,
)
from leaderboard_tools.size.sizing import (
    AGGREGATOR_MEMORY_MB,
    AGGREGATOR_WRITE_CONCURRENCY,
    AMONG_ENTITIES_MOST,
    AMONG_READ_UNITS_PER_ENTITY,
    CALL_LATENCY_SECONDS,
    CALLS_IN_LINE_BESIDE_GET_RECORDS,
    CPU_MS_PER_AGGREGATE_WRITE,
    CPU_MS_PER_RECORD,
    INDEX_WRITES_PER_UPDATE,
    QUERY_MEMORY_MB,
    QUERY_READER_THREADS,
    RECORDS_PER_GET_RECORDS,
    TOP_PAGE_READ_UNITS_PER_PARTITION,
    Sizing,
)


@dataclass(frozen=True)
class CostLine:
    item: str
    per_second: float
    """Request units (or requests, or GB-seconds) a second."""
    price: Price
    module: bool = True
    """False for the downloads themselves: the application's writes, which the module only reads."""

    @property
    def per_month(self) -> float:
        return self.per_second * SECONDS_PER_MONTH

    @property
    def dollars_per_month(self) -> float:
        return self.per_month * self.price.per_unit


@dataclass(frozen=True)
class Cost:
    lines: list[CostLine]
    aggregator_seconds_per_invocation: float
    query_seconds_per_page: float

    @property
    def module_dollars_per_month(self) -> float:
        return sum(line.dollars_per_month for line in self.lines if line.module)

    @property
    def dollars_per_month(self) -> float:
        return sum(line.dollars_per_month for line in self.lines)


def get_records_per_invocation(batch_size: int) -> int:
    """The aggregator reads its batch's records itself, 1,000 a call, and one call more finds the end."""
    return 1 + batch_size // RECORDS_PER_GET_RECORDS


def aggregator_seconds_per_invocation(
    batch_size: int,
    aggregate_writes_per_invocation: float,
    ledger_writes_per_invocation: float = 0.0,
    aggregate_reads_per_invocation: float = 0.0,
) -> float:
    """CPU (the benchmark's, fitted) plus the calls it waits for: those in line one after another, the aggregate
    writes in rounds of `aggregator_write_concurrency`. Ledger mode's writes are taken as an aggregate write each, in
    rounds of their own before the aggregate writes (they decide what those write): an estimate until the benchmark
    measures ledger mode. The tie-break first_reached's reads wait as the writes they come before."""
    writes = aggregate_writes_per_invocation + ledger_writes_per_invocation
    cpu_ms = CPU_MS_PER_RECORD * batch_size + CPU_MS_PER_AGGREGATE_WRITE * writes
    waits = (
        CALLS_IN_LINE_BESIDE_GET_RECORDS
        + get_records_per_invocation(batch_size)
        + math.ceil(ledger_writes_per_invocation / AGGREGATOR_WRITE_CONCURRENCY)
        + math.ceil(aggregate_writes_per_invocation / AGGREGATOR_WRITE_CONCURRENCY)
        + math.ceil(aggregate_reads_per_invocation / AGGREGATOR_WRITE_CONCURRENCY)
    )
    return cpu_ms / 1000 + waits * CALL_LATENCY_SECONDS


def cost(
    sizing: Sizing,
    queries_per_second: float = 0.0,
    among_per_second: float = 0.0,
    among_entities: int = AMONG_ENTITIES_MOST,
) -> Cost:
    """What the load costs a month at `sizing.shown` shards, at PRICES: see docs/sizing.md, "What it costs".
    `among_per_second` requests of `among_entities` each: one BatchGetItem each, waited for once."""
    workload = sizing.workload
    aggregate_writes = sizing.pressure.aggregate_updates_per_second
    invocations = workload.invocations_per_second
    ledger_writes = workload.ledger_writes_per_second
    aggregate_reads = aggregate_writes if workload.first_reached else 0.0
    seconds = aggregator_seconds_per_invocation(
        workload.batch_size, aggregate_writes / invocations, ledger_writes / invocations, aggregate_reads / invocations
    )
    query_seconds = math.ceil(sizing.shown / QUERY_READER_THREADS) * CALL_LATENCY_SECONDS
    lines = [
        CostLine("aggregate writes", aggregate_writes, WRITE_REQUEST_UNIT),
        CostLine("index writes", INDEX_WRITES_PER_UPDATE * aggregate_writes, WRITE_REQUEST_UNIT),
        CostLine("ledger writes (one conditional write per download key and step)", ledger_writes, WRITE_REQUEST_UNIT),
        CostLine(
            "aggregate reads (first_reached: one strongly consistent read per aggregate write)",
            aggregate_reads,
            READ_REQUEST_UNIT,
        ),
        CostLine("progress table writes", invocations, WRITE_REQUEST_UNIT),
        CostLine("progress table reads", invocations, READ_REQUEST_UNIT),
        CostLine(
            "stream reads (the aggregator's GetRecords)",
            invocations * get_records_per_invocation(workload.batch_size),
            STREAMS_READ_REQUEST_UNIT,
        ),
        CostLine("aggregator requests", invocations, LAMBDA_REQUEST),
        CostLine("aggregator GB-seconds", invocations * seconds * AGGREGATOR_MEMORY_MB / 1024, LAMBDA_GB_SECOND),
        CostLine(
            "index reads (top-10 pages)",
            queries_per_second * sizing.shown * TOP_PAGE_READ_UNITS_PER_PARTITION,
            READ_REQUEST_UNIT,
        ),
        CostLine("query requests", queries_per_second, LAMBDA_REQUEST),
        CostLine("query GB-seconds", queries_per_second * query_seconds * QUERY_MEMORY_MB / 1024, LAMBDA_GB_SECOND),
        CostLine(
            f"among reads (one BatchGetItem of {among_entities} aggregates)",
            among_per_second * among_entities * AMONG_READ_UNITS_PER_ENTITY,
            READ_REQUEST_UNIT,
        ),
        CostLine("among requests", among_per_second, LAMBDA_REQUEST),
        CostLine(
            "among GB-seconds", among_per_second * CALL_LATENCY_SECONDS * QUERY_MEMORY_MB / 1024, LAMBDA_GB_SECOND
        ),
        CostLine("downloads written (the application's)", workload.downloads_per_second, WRITE_REQUEST_UNIT, False),
        CostLine(
            "downloads edited and deleted (the application's)",
            workload.records_per_second - workload.downloads_per_second,
            WRITE_REQUEST_UNIT,
            False,
        ),
    ]
    return Cost(lines, aggregator_seconds_per_invocation=seconds, query_seconds_per_page=query_seconds)
