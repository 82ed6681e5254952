"""What the module deployed around a table, read from AWS: the settings the operator tools must agree with.

From the table alone: its stream (DescribeTable), the event source mapping reading that stream
(ListEventSourceMappings by the stream ARN), the aggregator it invokes and the aggregator's
environment (GetFunctionConfiguration: attribute names, leaderboard shards, failure queue, progress
table), the query function beside it (`<name>-query` for `<name>-aggregator`: the leaderboard
layouts it reads), the table's TTL attribute (DescribeTimeToLive) and the mapping's tumbling window.
A flag may stand in for what cannot be read; a flag that contradicts what was read is refused, so
a tool never writes aggregates under names or in index partitions the deployment does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib.metadata import version
from typing import Any

from botocore.exceptions import ClientError

from leaderboard_core.attributes import NAME_VARIABLES, AttributeNames
from leaderboard_core.buckets import (
    TIME_ZONE_DATA,
    TIME_ZONE_DATA_VARIABLE,
    UTC_CALENDAR,
    UTC_ZONE,
    Calendar,
    calendar_from_environment,
)
from leaderboard_core.claims import CLAIMS_TABLE_VARIABLE, LEDGER_VARIABLE
from leaderboard_core.index_layout import ENTITY_TIE_BREAK, TIE_BREAK_VARIABLE
from leaderboard_core.source_items import (
    AGGREGATES_TABLE_VARIABLE,
    RETRACTIONS_VARIABLE,
    DownloadMarker,
    marker_from_environment,
)

NAME_FLAGS = {name: f"--{name.replace('_', '-')}-attribute" for name in NAME_VARIABLES}
AGGREGATOR_SUFFIX = "-aggregator"
QUERY_SUFFIX = "-query"
AGGREGATES_SUFFIX = "-aggregates"
STREAM_READERS_VARIABLE = "STREAM_READERS"
"""The module's `stream_readers`: 1, the mapping is each shard's only steady reader (ledger mode); else 2."""
TWO_STREAM_READERS = 2


class DeploymentError(RuntimeError):
    """The deployment cannot be read, is not the module's, or contradicts a flag: nothing was changed."""


class NoDeployment(DeploymentError):
    """No deployment of the module around the table: no such table, or no aggregator of the module reads its stream."""

    def __init__(self, table: str, reason: str) -> None:
        super().__init__(
            f"no deployment of the module found for table {table}: {reason} "
            "(--table takes either table of a deployment: the downloads' or its aggregates')"
        )


@dataclass(frozen=True)
class Overrides:
    """What the operator passed on the command line; None: read it from the deployment."""

    names: dict[str, str] = field(default_factory=dict)
    leaderboard_shards: int | None = None
    failure_queue_url: str | None = None
    progress_table: str | None = None


@dataclass(frozen=True)
class Deployment:
    table: str
    """The downloads' table, whose stream the aggregator reads (the module's own, or source_table_name)."""
    table_arn: str
    stream_arn: str | None
    names: AttributeNames
    leaderboard_shards: int | None
    """What the aggregator writes (LEADERBOARD_SHARDS): where a repaired or moved aggregate belongs."""
    query_leaderboard_shards: int | None
    query_leaderboard_shards_previous: int | None
    """The layouts the query function reads; None when it was not found."""
    ttl_attribute: str | None
    window_seconds: int | None
    failure_queue_url: str | None
    progress_table: str | None
    aggregator_function: str | None
    query_function: str | None
    mapping_uuid: str | None
    mapping_state: str | None
    periods: tuple[str, ...] = ("month",)
    """LEADERBOARD_PERIODS: the boards the aggregator keeps; the guide's months by default."""
    calendar: Calendar = UTC_CALENDAR
    """LEADERBOARD_TIME_ZONE and the seasons: the aggregator's clock for boards, which a recount buckets by too."""
    recount_band_queue_url: str | None = None
    """RECOUNT_BAND_QUEUE_URL: where a repair records each band it opens and deletes the record when it closes it;
    None (a deployment older than the queue): the failure queue, the record delayed toward the band's deadline."""
    category_attribute: str | None = None
    sum_attribute: str | None = None
    """SUM_ATTRIBUTE: aggregates hold a sum of it, not a count of downloads."""
    aggregates_table: str = ""
    """AGGREGATES_TABLE_NAME: where the aggregates and the leaderboard index are; "" (the guide's layout): `table`."""
    key_attributes: tuple[str, ...] = ()
    """The downloads table's primary key (DescribeTable): what identifies a download, whatever the key schema."""
    marker: DownloadMarker | None = None
    """source_item_filter: which items of a shared table are downloads; None: every item with the entity and time."""
    claims_table: str | None = None
    """CLAIMS_TABLE_NAME (backfill_claims): where the aggregator claims each download before counting it, and where
    `backfill` claims what it counts; None: the aggregator claims nothing, and no backfill can run."""
    retractions: bool = False
    """RETRACTIONS (the module's `retractions`): the aggregator follows edits and deletions of downloads, so a repair's
    band holds their records too and a count may go down (and back to 0, out of the index)."""
    tie_break: str = ENTITY_TIE_BREAK
    """LEADERBOARD_TIE_BREAK (the module's `leaderboard_tie_break`): how a written aggregate's order breaks ties."""
    ledger: bool = False
    """LEDGER (the module's `ledger`): the claims table is the ledger, kept for good; the backfill records what it
    counts of each download there and may run at any time, and there is no release step."""
    stream_readers: int = TWO_STREAM_READERS
    """STREAM_READERS (the module's `stream_readers`): 1, the aggregator applies only what the mapping delivers and
    reads a batch the mapping gave up back when `recover` hands it over; 2 (and where it is not set), it reads each
    shard itself from its checkpoint."""

    @property
    def one_stream_reader(self) -> bool:
        """The mapping is each shard's only steady reader: a batch it gave up is read back, not counted from a
        checkpoint."""
        return self.stream_readers == 1

    @property
    def aggregates(self) -> str:
        """The table holding the aggregates."""
        return self.aggregates_table or self.table

    @property
    def aggregates_beside(self) -> bool:
        """The aggregates share the downloads' table (the guide's layout): their writes are on its stream too."""
        return self.aggregates == self.table

    @property
    def entity_is_partition(self) -> bool:
        """A song's downloads are one partition of the table (a Query reads them), not spread over it."""
        return bool(self.key_attributes) and self.key_attributes[0] == self.names.entity

    def shards(self) -> int:
        if self.leaderboard_shards is None:
            raise DeploymentError(f"no aggregator of this module reads the stream of {self.table}: pass --shards")
        return self.leaderboard_shards

    def as_json(self) -> dict[str, Any]:
        return {item.name: _plain(getattr(self, item.name)) for item in fields(self)}


def _plain(value: Any) -> Any:
    if isinstance(value, AttributeNames | DownloadMarker):
        return {item.name: getattr(value, item.name) for item in fields(value)}
    if isinstance(value, Calendar):
        season = value.season
        seasons = None if season is None else {"start": season.start.isoformat(), "length_days": season.length_days}
        return {"time_zone": value.zone_name, "season": seasons}
    return list(value) if isinstance(value, tuple) else value


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _queue_identity(url: str) -> str:
    """Account and queue name: the same queue has more than one URL form (legacy and regional hosts)."""
    return "/".join(url.rstrip("/").split("/")[-2:])


def _environment(lambda_client: Any, function: str) -> dict[str, str] | None:
    """A function's environment variables; None if the function does not exist."""
    try:
        configuration = lambda_client.get_function_configuration(FunctionName=function)
    except ClientError as error:
        if _code(error) == "ResourceNotFoundException":
            return None
        raise DeploymentError(f"cannot read the configuration of {function}: {error}") from error
    environment = configuration.get("Environment") or {}
    if environment.get("Error"):
        problem = environment["Error"]
        raise DeploymentError(
            f"cannot read the environment of {function}: {problem.get('ErrorCode')}: {problem.get('Message')}"
        )
    return dict(environment.get("Variables") or {})


def _aggregator_mapping(
    lambda_client: Any, table: str, stream_arn: str
) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The mapping of this stream whose function is the module's aggregator for this table, and its environment."""
    found = []
    try:
        pages = lambda_client.get_paginator("list_event_source_mappings").paginate(EventSourceArn=stream_arn)
        mappings = [mapping for page in pages for mapping in page.get("EventSourceMappings", [])]
    except ClientError as error:
        raise DeploymentError(f"cannot list the event source mappings of {stream_arn}: {error}") from error
    # A mapping Terraform replaced stays listed beside its successor, of the same function (AWS,
    # DeleteEventSourceMapping: "it enters a Deleting state and might not be completely deleted for several
    # seconds"): aggregators are counted by function, each through its live mapping.
    live_mapping_of: dict[str, dict[str, Any]] = {}
    for mapping in sorted(mappings, key=lambda mapping: mapping.get("State") == "Deleting"):
        live_mapping_of.setdefault(mapping["FunctionArn"], mapping)
    for mapping in live_mapping_of.values():
        environment = _environment(lambda_client, mapping["FunctionArn"])
        if environment is not None and environment.get("TABLE_NAME") == table and "COUNT_ATTRIBUTE" in environment:
            found.append((mapping, environment))
    if len(found) > 1:
        functions = ", ".join(sorted(mapping["FunctionArn"] for mapping, _ in found))
        raise DeploymentError(f"more than one aggregator reads the stream of {table}: {functions}")
    return found[0] if found else None


def leaderboard_periods(environment: Mapping[str, str]) -> tuple[str, ...]:
    """LEADERBOARD_PERIODS as the functions read it: comma-separated, the guide's months where it is not set."""
    return tuple(period for period in environment.get("LEADERBOARD_PERIODS", "month").split(",") if period)


def deployed_calendar(environment: Mapping[str, str]) -> Calendar:
    """The aggregator's time zone and seasons as it reads them (UTC, no seasons, where they are not set)."""
    try:
        calendar = calendar_from_environment(environment)
    except ValueError as error:
        raise DeploymentError(f"the aggregator's settings are not ones it runs with: {error}") from None
    deployed = environment.get(TIME_ZONE_DATA_VARIABLE)
    if calendar.zone_name != UTC_ZONE and deployed and deployed != (installed := version(TIME_ZONE_DATA)):
        raise DeploymentError(
            f"the functions bucket by the time zone rules of tzdata {deployed} and these tools by tzdata {installed}, "
            f"which may differ for {calendar.zone_name}: install tzdata=={deployed} beside leaderboard-tools "
            f"(pip install 'tzdata=={deployed}'), so that reconcile and backfill bucket as the aggregator does"
        )
    return calendar


def _optional_int(value: str | None) -> int | None:
    return int(value) if value not in (None, "") else None


def _agree(setting: str, flag: str, deployed: Any, given: Any, source: str) -> Any:
    if deployed is not None and given is not None and deployed != given:
        raise DeploymentError(f"{flag} {given} contradicts the deployment: {source} says {deployed}")
    return deployed if deployed is not None else given


def _source_of_aggregates(lambda_client: Any, table: str) -> str | None:
    """The downloads' table of an aggregates table `<name>-aggregates`: its aggregator `<name>-aggregator` says."""
    if not table.endswith(AGGREGATES_SUFFIX):
        return None
    environment = _environment(lambda_client, table[: -len(AGGREGATES_SUFFIX)] + AGGREGATOR_SUFFIX) or {}
    return environment.get("TABLE_NAME") if environment.get(AGGREGATES_TABLE_VARIABLE) == table else None


def discover(clients: Any, table: str, overrides: Overrides | None = None) -> Deployment:
    """Read the module's settings around `table` (the downloads' table, or the aggregates'); flags fill what cannot be
    read and must agree with what can."""
    overrides = overrides or Overrides()
    dynamodb, lambda_client = clients.dynamodb, clients.lambda_
    table = _source_of_aggregates(lambda_client, table) or table
    try:
        description = dynamodb.describe_table(TableName=table)["Table"]
        ttl = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    except ClientError as error:
        if _code(error) == "ResourceNotFoundException":
            raise NoDeployment(
                table, "there is no such table (check --table, and --region or --endpoint-url)"
            ) from error
        raise DeploymentError(f"cannot read table {table}: {error}") from error
    keys = {key["KeyType"]: key["AttributeName"] for key in description["KeySchema"]}
    stream_enabled = (description.get("StreamSpecification") or {}).get("StreamEnabled", False)
    stream_arn = description.get("LatestStreamArn") if stream_enabled else None
    found = _aggregator_mapping(lambda_client, table, stream_arn) if stream_arn else None
    mapping, environment = found if found else ({}, {})
    aggregator = mapping.get("FunctionArn")
    source = f"the aggregator {aggregator}" if aggregator else "the deployment"
    if not aggregator and not overrides.names:
        raise NoDeployment(table, "no aggregator of the module reads its stream" if stream_arn else "it has no stream")

    names: dict[str, str] = {}
    for name, variable in NAME_VARIABLES.items():
        deployed = environment.get(variable)
        if name == "entity":
            deployed = deployed or keys.get("HASH")
        if name == "sort_key":
            deployed = deployed or keys.get("RANGE")
        value = _agree(name, NAME_FLAGS[name], deployed, overrides.names.get(name), f"{source} ({variable})")
        if value is None:
            raise DeploymentError(
                f"no aggregator of this module reads the stream of {table}, so its {variable} is unknown: "
                f"pass {NAME_FLAGS[name]}"
            )
        names[name] = value
    aggregates_table = environment.get(AGGREGATES_TABLE_VARIABLE) or table
    if aggregates_table != table:
        try:
            aggregate_keys = {
                key["KeyType"]: key["AttributeName"]
                for key in dynamodb.describe_table(TableName=aggregates_table)["Table"]["KeySchema"]
            }
        except ClientError as error:
            raise DeploymentError(f"cannot read the aggregates table {aggregates_table}: {error}") from error
        if (names["entity"], names["sort_key"]) != (aggregate_keys.get("HASH"), aggregate_keys.get("RANGE")):
            raise DeploymentError(
                f"table {aggregates_table} is keyed by {aggregate_keys.get('HASH')}/{aggregate_keys.get('RANGE')}, "
                f"not {names['entity']}/{names['sort_key']}: it is not the aggregates table of this aggregator"
            )
    elif (names["entity"], names["sort_key"]) != (keys.get("HASH"), keys.get("RANGE")):
        raise DeploymentError(
            f"table {table} is keyed by {keys.get('HASH')}/{keys.get('RANGE')}, "
            f"not {names['entity']}/{names['sort_key']}: it is not the table this aggregator counts"
        )

    shards = _agree(
        "leaderboard_shards",
        "--shards",
        _optional_int(environment.get("LEADERBOARD_SHARDS")),
        overrides.leaderboard_shards,
        f"{source} (LEADERBOARD_SHARDS)",
    )

    queue = environment.get("FAILURE_QUEUE_URL") or None
    if queue and overrides.failure_queue_url and _queue_identity(queue) != _queue_identity(overrides.failure_queue_url):
        raise DeploymentError(
            f"--queue-url {overrides.failure_queue_url} contradicts the deployment: "
            f"{source} (FAILURE_QUEUE_URL) says {queue}"
        )
    progress_table = _agree(
        "progress_table",
        "--progress-table",
        environment.get("PROGRESS_TABLE_NAME") or None,
        overrides.progress_table,
        f"{source} (PROGRESS_TABLE_NAME)",
    )

    query_function, query_environment = None, None
    if aggregator:
        function_name = aggregator.split(":function:")[-1].split(":")[0]
        if function_name.endswith(AGGREGATOR_SUFFIX):
            candidate = function_name[: -len(AGGREGATOR_SUFFIX)] + QUERY_SUFFIX
            query_environment = _environment(lambda_client, candidate)
            served = (query_environment or {}).get(AGGREGATES_TABLE_VARIABLE) or (query_environment or {}).get(
                "TABLE_NAME"
            )
            if served == aggregates_table:
                query_function = candidate
            else:
                query_environment = None

    return Deployment(
        table=table,
        table_arn=description["TableArn"],
        stream_arn=stream_arn,
        names=AttributeNames(**names),
        leaderboard_shards=shards,
        query_leaderboard_shards=_optional_int((query_environment or {}).get("LEADERBOARD_SHARDS")),
        query_leaderboard_shards_previous=_optional_int((query_environment or {}).get("LEADERBOARD_SHARDS_PREVIOUS")),
        ttl_attribute=ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else None,
        window_seconds=mapping.get("TumblingWindowInSeconds"),
        failure_queue_url=queue or overrides.failure_queue_url,
        recount_band_queue_url=environment.get("RECOUNT_BAND_QUEUE_URL") or None,
        progress_table=progress_table,
        aggregator_function=aggregator,
        query_function=query_function,
        mapping_uuid=mapping.get("UUID"),
        mapping_state=mapping.get("State"),
        periods=leaderboard_periods(environment),
        calendar=deployed_calendar(environment),
        category_attribute=environment.get("CATEGORY_ATTRIBUTE") or None,
        sum_attribute=environment.get("SUM_ATTRIBUTE") or None,
        aggregates_table="" if aggregates_table == table else aggregates_table,
        key_attributes=tuple(
            key["AttributeName"] for key in sorted(description["KeySchema"], key=lambda key: key["KeyType"] != "HASH")
        ),
        marker=marker_from_environment(environment),
        claims_table=environment.get(CLAIMS_TABLE_VARIABLE) or None,
        retractions=environment.get(RETRACTIONS_VARIABLE) == "true",
        ledger=environment.get(LEDGER_VARIABLE) == "true",
        tie_break=environment.get(TIE_BREAK_VARIABLE) or ENTITY_TIE_BREAK,
        stream_readers=deployed_stream_readers(environment),
    )


def deployed_stream_readers(environment: Mapping[str, str]) -> int:
    """STREAM_READERS as the aggregator reads it: 1 or 2, and 2 where it is not set (a deployment older than it)."""
    value = environment.get(STREAM_READERS_VARIABLE) or str(TWO_STREAM_READERS)
    if value not in ("1", "2"):
        raise DeploymentError(f"the aggregator's {STREAM_READERS_VARIABLE} is {value!r}: the module sets 1 or 2")
    return int(value)


def check_layout(deployment: Deployment, shards: int) -> None:
    """`rekey --shards N` moves aggregates where the deployed functions write and read them, or refuses."""
    if deployment.leaderboard_shards is not None and shards != deployment.leaderboard_shards:
        raise DeploymentError(
            f"--shards {shards} is not the deployed layout: the aggregator writes leaderboard_shards = "
            f"{deployment.leaderboard_shards}. Apply the module with leaderboard_shards = {shards} and "
            "leaderboard_shards_previous = the old value first"
        )
    if deployment.query_leaderboard_shards is not None and deployment.query_leaderboard_shards != shards:
        raise DeploymentError(
            f"--shards {shards} is not the layout the query function {deployment.query_function} reads "
            f"(leaderboard_shards = {deployment.query_leaderboard_shards}): "
            "moved aggregates would leave the leaderboard"
        )
