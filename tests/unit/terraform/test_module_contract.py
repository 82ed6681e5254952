"""The environment contract between terraform/lambda.tf and the handlers: same names, same defaults."""

from __future__ import annotations

from typing import Any

import pytest

import query
from aggregator_settings import Settings
from boards import Boards, boards_from_environment
from index_reads import Layout
from tests.terraform_config import hcl_document, unquoted
from tests.unit.terraform.lambda_environment import (
    TERRAFORM,
    RecordingEnvironment,
    function_environment,
    variable_default,
)

MODULE_ONLY = {
    "POWERTOOLS_SERVICE_NAME",
    "POWERTOOLS_METRICS_NAMESPACE",
    "RECOUNT_BAND_QUEUE_URL",
    "LEADERBOARD_TIME_ZONE_DATA",
}
"""Read by Powertools, or by the operator tools from the deployed function (leaderboard_tools.deployment), not by the
handlers' code."""
SET_BY_LAMBDA = {"AWS_LAMBDA_FUNCTION_MEMORY_SIZE"}
"""Reserved variables Lambda sets in every function, which a handler may read beside the module's."""
VALID = {
    "TABLE_ARN": "arn:aws:dynamodb:us-east-1:0:table/t",
    "AGGREGATE_WRITES": "per_batch",
    "LEADERBOARD_PERIODS": "day,season,all",
    "LEADERBOARD_TIME_ZONE": "America/New_York",
    "LEADERBOARD_SEASON_START": "2026-01-05",
    "LEADERBOARD_SEASON_LENGTH_DAYS": "28",
    "LEADERBOARD_TIE_BREAK": "first_reached",
    "STREAM_READERS": "2",
}
"""Settings a handler checks; every other variable is given "1"."""


@pytest.mark.parametrize(
    ("function", "read_settings"),
    [
        ("aggregator", lambda environ: Settings.from_environment(environ)),
        (
            "query",
            lambda environ: (
                query.schema_from_environment(environ),
                query.layout_from_environment(environ),
                boards_from_environment(environ),
                query.aggregates_table_from_environment(environ),
            ),
        ),
    ],
)
def test_the_handler_reads_exactly_what_the_module_sets(function: str, read_settings: Any) -> None:
    # given the environment variables lambda.tf gives the function
    names = set(function_environment(function)) - MODULE_ONLY
    environment = RecordingEnvironment({name: VALID.get(name, "1") for name in names})
    # when the handler reads its settings
    read_settings(environment)
    # then it asks for each of them, and for nothing the module (or Lambda itself) does not set
    assert environment.asked - SET_BY_LAMBDA == names


def test_the_aggregators_defaults_are_the_modules_defaults() -> None:
    settings = Settings.from_environment({"TABLE_NAME": "t", "TABLE_ARN": "arn", "PROGRESS_TABLE_NAME": "p"})
    assert settings.deadline_margin_ms == variable_default("aggregator_deadline_margin_ms")
    assert settings.write_concurrency == variable_default("aggregator_write_concurrency")
    assert settings.aggregate_writes == variable_default("aggregate_writes")
    assert (settings.schema.entity, settings.schema.sort_key, settings.schema.timestamp) == (
        variable_default("entity_attribute_name"),
        variable_default("sort_key_attribute_name"),
        variable_default("timestamp_attribute_name"),
    )
    assert (settings.schema.period, settings.schema.count, settings.schema.order) == (
        variable_default("period_attribute_name"),
        variable_default("count_attribute_name"),
        variable_default("order_attribute_name"),
    )
    assert settings.leaderboard_shards == variable_default("leaderboard_shards")
    assert settings.schema.retractions is variable_default("retractions")


def test_the_query_functions_defaults_are_the_modules_defaults() -> None:
    schema = query.schema_from_environment({})
    assert schema.index_name == variable_default("leaderboard_index_name")
    assert (schema.entity, schema.period, schema.count, schema.order) == (
        variable_default("entity_attribute_name"),
        variable_default("period_attribute_name"),
        variable_default("count_attribute_name"),
        variable_default("order_attribute_name"),
    )
    assert query.layout_from_environment({}) == Layout(variable_default("leaderboard_shards"), None)
    periods = tuple(unquoted(period) for period in variable_default("leaderboard_periods"))
    assert boards_from_environment({}) == Boards(periods)


def test_both_functions_bucket_by_the_modules_default_time_zone_with_no_seasons() -> None:
    # given the module's default zone and seasons, when each function reads an environment without them
    boards = boards_from_environment({})
    settings = Settings.from_environment({"TABLE_NAME": "t", "TABLE_ARN": "arn", "PROGRESS_TABLE_NAME": "p"})
    # then both keep UTC buckets and no seasons, as the module's defaults say
    assert variable_default("leaderboard_time_zone") == "UTC"
    assert variable_default("leaderboard_season") is None
    for calendar in (boards.calendar, settings.schema.calendar):
        assert (calendar.zone_name, calendar.season) == ("UTC", None)


def test_the_module_has_no_test_only_input_and_the_functions_read_no_test_switch() -> None:
    variables = hcl_document(TERRAFORM / "variables.tf")["variable"]
    names = [unquoted(name) for block in variables for name in block]
    assert not [name for name in names if name.startswith("test") or "fault" in name]
    for function in ("aggregator", "query"):
        assert not [name for name in function_environment(function) if "TEST" in name or "FAULT" in name]


def test_the_aggregator_follows_retractions_exactly_when_the_module_says_true() -> None:
    # given the two values lambda.tf can give RETRACTIONS
    expression = function_environment("aggregator")["RETRACTIONS"]
    assert expression == '${var.retractions ? "true" : "false"}'
    base = {"TABLE_NAME": "t", "TABLE_ARN": "arn", "PROGRESS_TABLE_NAME": "p"}
    # when the aggregator reads each, then only "true" turns retractions on
    assert Settings.from_environment({**base, "RETRACTIONS": "true"}).schema.retractions is True
    assert Settings.from_environment({**base, "RETRACTIONS": "false"}).schema.retractions is False
