"""What the aggregator reads from its environment: tables, attribute names, write mode, budgets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from download_records import Schema
from leaderboard_core.attributes import names_from_environment
from leaderboard_core.buckets import calendar_from_environment
from leaderboard_core.claims import CLAIMS_TABLE_VARIABLE, LEDGER_VARIABLE
from leaderboard_core.index_layout import ENTITY_TIE_BREAK, FIRST_REACHED, TIE_BREAK_VARIABLE, TIE_BREAKS
from leaderboard_core.source_items import AGGREGATES_TABLE_VARIABLE, RETRACTIONS_VARIABLE, marker_from_environment

GUIDE_SCHEMA = Schema()
"""The guide's attribute names: what the function uses where the module sets none."""
PER_BATCH = "per_batch"
PER_WINDOW = "per_window"
STREAM_READERS_VARIABLE = "STREAM_READERS"
"""Readers per stream shard: "2" (the mapping and the aggregator's own reads) or "1" (the mapping alone: ledger)."""
MEMORY_SIZE_VARIABLE = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
"""Set by Lambda in every function: "The amount of memory available to the function in MB"."""
READ_RECORDS_PER_MB = 128
"""Records one step reads per MB of the function's memory: 65,536 at 512 MB, a 60-second window at 1,000 a second."""
READ_BYTES_PER_MB = 64 * 1024
"""Stream record bytes one step reads per MB of the function's memory: 32 MiB at 512 MB."""
MEMORY_CEILING_SHARE = 0.6
"""The share of the function's memory the process may hold resident before a step reads no further page."""


@dataclass(frozen=True)
class Settings:
    aggregates_table_name: str
    """Where the aggregator writes aggregates (AGGREGATES_TABLE_NAME; in the guide's layout the downloads' table)."""
    table_arn: str
    """The downloads' table (TABLE_ARN), whose streams the aggregator reads."""
    progress_table_name: str
    schema: Schema
    leaderboard_shards: int
    failure_queue_url: str | None
    aggregate_writes: str
    write_concurrency: int
    deadline_margin_ms: int
    claims_table_name: str | None = None
    """CLAIMS_TABLE_NAME: while a backfill may count the table's history, every download is claimed there first."""
    ledger: bool = False
    """LEDGER: the claims table is kept for good as the ledger, and every INSERT, MODIFY and REMOVE of a download moves
    its contribution by the ledger's rule (docs/exactly-once-ledger.md); it implies retractions' parse."""
    stream_readers: int = 2
    """STREAM_READERS: 2, the aggregator reads each shard itself beside the mapping; 1 (ledger mode only), the mapping's
    deliveries are applied by versioned ledger items and nothing else reads the shard (one_reader.py)."""
    read_budget_records: int = 20_000
    """Records one step reads at most (a page more at most); the rest waits for the next step or invocation."""
    read_budget_bytes: int = 32 * 1024 * 1024
    """Stream record bytes (`SizeBytes`) one step reads at most (a page, 1 MB, more at most): with the record
    budget, what bounds the invocation's memory whatever the backlog."""
    memory_ceiling_bytes: int | None = None
    """Resident memory at which a step reads no further page (measured before each page after its first, so that
    every step moves on): MEMORY_CEILING_SHARE of the function's memory. The record and byte budgets assume narrow
    items; a record's Python objects grow with its attributes and nesting, which `SizeBytes` does not show (a list of
    small numbers takes far more than its bytes), so what the process holds is measured, not modelled. None: not
    measured."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        aggregate_writes = environ.get("AGGREGATE_WRITES", PER_BATCH)
        if aggregate_writes not in (PER_BATCH, PER_WINDOW):
            raise ValueError(f"AGGREGATE_WRITES is {aggregate_writes!r}, not {PER_BATCH} or {PER_WINDOW}")
        calendar = calendar_from_environment(environ)
        periods = calendar.periods_from_text(environ.get("LEADERBOARD_PERIODS", "month"))
        aggregates_table = environ.get(AGGREGATES_TABLE_VARIABLE) or environ["TABLE_NAME"]
        ledger = environ.get(LEDGER_VARIABLE, "false") == "true"
        claims_table = environ.get(CLAIMS_TABLE_VARIABLE) or None
        if ledger and claims_table is None:
            raise ValueError(
                f"{LEDGER_VARIABLE} is true but {CLAIMS_TABLE_VARIABLE} is not set: ledger mode keeps each download's "
                "ledger item in the claims table"
            )
        stream_readers = _stream_readers(environ, ledger)
        retractions = ledger or environ.get(RETRACTIONS_VARIABLE, "false") == "true"
        tie_break = environ.get(TIE_BREAK_VARIABLE) or ENTITY_TIE_BREAK
        if tie_break not in TIE_BREAKS:
            raise ValueError(f"{TIE_BREAK_VARIABLE} is {tie_break!r}, not one of {', '.join(TIE_BREAKS)}")
        if tie_break == FIRST_REACHED and retractions:
            raise ValueError(
                f"{TIE_BREAK_VARIABLE} {FIRST_REACHED} with retractions: a retraction cannot restore the previous "
                "latest counted download's instant (docs/query-contract.md)"
            )
        return cls(
            aggregates_table_name=aggregates_table,
            table_arn=environ["TABLE_ARN"],
            progress_table_name=environ["PROGRESS_TABLE_NAME"],
            schema=Schema(
                **names_from_environment(environ),
                periods=periods,
                calendar=calendar,
                category=environ.get("CATEGORY_ATTRIBUTE") or None,
                amount=environ.get("SUM_ATTRIBUTE") or None,
                aggregates_beside=aggregates_table == environ["TABLE_NAME"],
                marker=marker_from_environment(environ),
                retractions=retractions,
                tie_break=tie_break,
            ),
            leaderboard_shards=int(environ.get("LEADERBOARD_SHARDS", "1")),
            failure_queue_url=environ.get("FAILURE_QUEUE_URL") or None,
            aggregate_writes=aggregate_writes,
            write_concurrency=int(environ.get("WRITE_CONCURRENCY", "8")),
            deadline_margin_ms=int(environ.get("DEADLINE_MARGIN_MS", "5000")),
            claims_table_name=claims_table,
            ledger=ledger,
            stream_readers=stream_readers,
            **read_budget(environ),
        )


def _stream_readers(environ: Mapping[str, str], ledger: bool) -> int:
    """STREAM_READERS, refused unless "1" or "2", and "1" unless in ledger mode: only versioned ledger items make the
    mapping's deliveries exact on their own."""
    readers = environ.get(STREAM_READERS_VARIABLE) or "2"
    if readers not in ("1", "2"):
        raise ValueError(f"{STREAM_READERS_VARIABLE} is {readers!r}, not 1 or 2")
    if readers == "1" and not ledger:
        raise ValueError(
            f"{STREAM_READERS_VARIABLE} is 1 but {LEDGER_VARIABLE} is not true: one reader per shard needs ledger "
            "mode's versioned ledger items (docs/exactly-once-ledger.md)"
        )
    return int(readers)


def read_budget(environ: Mapping[str, str]) -> dict[str, int]:
    """One step's read budget in proportion to the function's memory, so that a window a larger function can hold
    is read, written and checkpointed once (per_window: one write per aggregate and window, not one per step);
    without the memory named, the defaults."""
    memory_mb = environ.get(MEMORY_SIZE_VARIABLE, "")
    if not memory_mb.isdigit() or int(memory_mb) == 0:
        return {}
    return {
        "read_budget_records": int(memory_mb) * READ_RECORDS_PER_MB,
        "read_budget_bytes": int(memory_mb) * READ_BYTES_PER_MB,
        "memory_ceiling_bytes": int(int(memory_mb) * 2**20 * MEMORY_CEILING_SHARE),
    }
