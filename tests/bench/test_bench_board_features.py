"""The board-features part without an emulator: its counting build, its arithmetic and its tables."""

from __future__ import annotations

import importlib
import io
import json
import sys
import zipfile
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from leaderboard_dev.bench import __main__ as bench_main
from leaderboard_dev.bench import board_features, report
from leaderboard_dev.bench.request_counts import COUNT_MESSAGE, counted_invocations, counting_build, requests_by_kind
from leaderboard_tools.size.prices import LAMBDA_GB_SECOND, READ_REQUEST_UNIT, WRITE_REQUEST_UNIT

from .test_bench_arithmetic import raw_results

BOARD = {"entities": 1000, "largest_item_bytes": 90, "mean_entry_bytes": 80.0}


def side(tie_break: str, writes: int, reads: int, exact: bool = True) -> dict[str, Any]:
    requests = {"UpdateItem": writes} | ({"GetItem (consistent)": reads} if reads else {})
    measured = {
        "tie_break": tie_break,
        "downloads": 1000,
        "exact": exact,
        "wrong_aggregates": 0 if exact else 3,
        "aggregate_writes": writes,
        "invocations": 11,
        "invocations_with_records": 10,
        "mean_batch": 100.0,
        "requests_to_aggregates": requests,
        "counted_invocations": 11,
        "handler_seconds_on_the_emulator": 1.0,
        "largest_aggregate_bytes": 240,
    }
    return measured | board_features.per_100(measured)


SHIPPED_QUERY = """
import boto3


def lambda_handler(event, context):
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.get_item(TableName="board", Key={"songID": {"S": "a"}, "SK": {"S": "2024-01"}})
    client.batch_get_item(
        RequestItems={"board": {"Keys": [{"songID": {"S": s}, "SK": {"S": "2024-01"}} for s in ("a", "b", "c")]}}
    )
    client.query(
        TableName="board",
        KeyConditionExpression="songID = :s",
        ExpressionAttributeValues={":s": {"S": "a"}},
        Select="COUNT",
    )
    return {"answered": True}
"""


def test_the_counting_build_counts_every_request_of_the_shipped_handler_and_keeps_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a shipped zip whose handler reads a table three ways, and its counting build
    shipped = tmp_path / "query.zip"
    with zipfile.ZipFile(shipped, "w") as archive:
        archive.writestr("query.py", SHIPPED_QUERY)
    build = counting_build(shipped, "query", tmp_path / "counting.zip", log_event=True)
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(build).extractall(unpacked)
    monkeypatch.syspath_prepend(str(unpacked))
    # the query Lambda's own module may be imported already under the same name: the build's is imported here, and
    # the Lambda's put back after
    for module in ("query", "shipped_query"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    printed = io.StringIO()

    # when the wrapped handler answers one request on moto
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="board",
            KeySchema=[{"AttributeName": "songID", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "songID", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        try:
            with redirect_stdout(printed):
                answer = importlib.import_module("query").lambda_handler({"songID": "a"}, None)
        finally:
            sys.modules.pop("query", None)
            sys.modules.pop("shipped_query", None)

    # then the answer is the shipped handler's, and one line counts each request with its keys and entries
    assert answer == {"answered": True}
    lines = counted_invocations([json.loads(line) for line in printed.getvalue().splitlines()])
    assert len(lines) == 1
    assert lines[0]["message"] == COUNT_MESSAGE
    assert lines[0]["event"] == {"songID": "a"}
    assert lines[0]["handler_ms"] > 0
    calls = lines[0]["calls"]
    assert [call["operation"] for call in calls] == ["GetItem", "BatchGetItem", "Query"]
    assert calls[1]["keys"] == 3
    assert calls[2]["scanned"] == 0
    assert requests_by_kind(lines, "board") == {"GetItem": 1, "BatchGetItem": 1, "Query": 1}
    assert requests_by_kind(lines, "another table") == {}


def test_reads_per_100_count_the_aggregators_gets_of_the_aggregates_apart_from_its_writes() -> None:
    # given a side that wrote 500 aggregates and read each once first, strongly consistent
    measured = side("first_reached", writes=500, reads=500)

    # then
    assert measured["writes_per_100"] == 50.0
    assert measured["reads_per_100"] == 50.0
    assert measured["consistent_reads"] == 500
    assert measured["writes_counted_in_the_function"] == 500


def test_the_dollars_charge_writes_index_writes_reads_and_the_rounds_the_function_waits() -> None:
    # given 500 writes and 500 reads of aggregates under 1 KB over 10 invocations, per 1,000 downloads
    measured = side("first_reached", writes=500, reads=500)

    # when
    dollars = board_features.dollars_per_million(measured)

    # then: 500,000 writes per million downloads, two index writes each, 500,000 reads, and per invocation
    # ceil(50 / 8) rounds of writes and as many of reads, 10 ms each at 0.5 GB
    assert dollars["aggregate_writes"] == pytest.approx(500_000 * WRITE_REQUEST_UNIT.per_unit, abs=1e-4)
    assert dollars["index_writes"] == pytest.approx(2 * 500_000 * WRITE_REQUEST_UNIT.per_unit, abs=1e-4)
    assert dollars["aggregate_reads"] == pytest.approx(500_000 * READ_REQUEST_UNIT.per_unit, abs=1e-4)
    gb_seconds = 1000 * 10 * (7 + 7) * 0.010 * 0.5
    assert dollars["lambda_waits"] == pytest.approx(gb_seconds * LAMBDA_GB_SECOND.per_unit, abs=1e-4)
    assert dollars["total"] == pytest.approx(sum(value for key, value in dollars.items() if key != "total"), abs=1e-3)


def test_first_reached_over_entity_is_the_ratio_of_the_totals_and_needs_both_sides_exact() -> None:
    # given the same writes on both sides, and first_reached reading each aggregate once
    sides = {"entity": side("entity", 500, 0), "first_reached": side("first_reached", 500, 500)}

    # when
    summary = board_features.tie_break_summary(sides)

    # then
    entity, first = (row["dollars_per_million"]["total"] for row in summary["sides"])
    assert summary["ratios"]["aggregate_writes"] == 1.0
    assert summary["ratios"]["aggregate_requests"] == 2.0
    assert summary["ratios"]["dollars"] == round(first / entity, 3)
    assert 1.0 < summary["ratios"]["dollars"] < 2.0
    assert summary["both_exact"]
    assert not board_features.tie_break_summary({**sides, "entity": side("entity", 500, 0, exact=False)})["both_exact"]
    assert not board_features.tie_break_summary({"entity": sides["entity"]})["both_exact"]


def test_read_units_follow_awss_rule_per_key_and_per_query_page() -> None:
    # then: a key's item under 4 KB is half a unit eventually consistent, one strongly; a Query page's entries summed
    assert board_features.call_read_units({"operation": "BatchGetItem", "consistent": False, "keys": 10}, BOARD) == 5
    assert board_features.call_read_units({"operation": "GetItem", "consistent": True}, BOARD) == 1
    assert board_features.call_read_units({"operation": "GetItem", "consistent": False}, BOARD) == 0.5
    # 100 entries of 80 B: 8,000 B, two 4 KB units, halved; a page that evaluated nothing still costs half a unit
    assert board_features.call_read_units({"operation": "Query", "consistent": False, "scanned": 100}, BOARD) == 1
    assert board_features.call_read_units({"operation": "Query", "consistent": False, "scanned": 0}, BOARD) == 0.5
    assert board_features.call_read_units({"operation": "UpdateItem", "consistent": False}, BOARD) == 0
    assert board_features.whole_board_read_units(BOARD) == 0.5 * 20  # 80,000 B in 4 KB units


def count_line(event: dict[str, Any], calls: list[dict[str, Any]], handler_ms: float) -> dict[str, Any]:
    return {"message": COUNT_MESSAGE, "event": event, "calls": calls, "handler_ms": handler_ms}


def test_among_is_compared_with_a_rank_request_for_each_of_its_entities() -> None:
    # given two among requests of two entities, and a rank of each (a GetItem, then 200 entries counted)
    entities = ["song1", "song2"]
    batch = {"operation": "BatchGetItem", "table": "t", "consistent": False, "keys": 2}
    get = {"operation": "GetItem", "table": "t", "consistent": False}
    query = {"operation": "Query", "table": "t", "consistent": False, "scanned": 200}
    lines = [count_line({"month": "m", "among": entities}, [batch], ms) for ms in (4.0, 6.0)]
    lines += [count_line({"month": "m", "songID": entity}, [get, query], 50.0) for entity in entities]
    lines.append(count_line({"month": "m", "among": ["song1"]}, [batch], 1.0))  # another N: not this case's
    latencies = {"among 2": [10.0, 30.0], "rank song1": [100.0], "rank song2": [300.0]}

    # when
    case = board_features.among_case(2, entities, lines, latencies, BOARD, "t")

    # then: among reads 2 keys at half a unit; each rank 0.5 + ceil(200 * 80 / 4096) / 2 = 2.5
    assert case["among"]["requests_counted"] == 2
    assert case["among"]["read_units"] == 1.0
    assert case["among"]["handler_ms_median"] == 5.0
    assert case["among"]["client_ms_median"] == 20.0
    assert case["ranks"]["read_units"] == 5.0
    assert case["ranks"]["calls"] == 4
    assert case["ranks"]["entries_evaluated"] == 400
    assert case["ranks"]["client_ms_total"] == 400.0
    assert case["read_units_ratio"] == 5.0
    assert case["client_time_ratio"] == 20.0
    assert case["handler_time_ratio"] == 20.0


def test_a_case_missing_a_rank_line_gives_no_ratio() -> None:
    # given an among request and only one of its two ranks counted
    batch = {"operation": "BatchGetItem", "table": "t", "consistent": False, "keys": 2}
    lines = [count_line({"among": ["a", "b"]}, [batch], 1.0), count_line({"songID": "a"}, [], 1.0)]

    # when
    case = board_features.among_case(2, ["a", "b"], lines, {}, BOARD, "t")

    # then
    assert case["read_units_ratio"] is None


def test_the_board_ties_at_its_tail_and_orders_each_entry_by_its_count() -> None:
    # when
    items = board_features.board_items(1000, "2019-05")

    # then
    counts = [int(item["DownloadCount"]["N"]) for item in items]
    orders = [int(item["LeaderboardOrder"]["N"]) for item in items]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == 100_000
    assert counts[-1] == counts[-2]
    assert orders == sorted(orders, reverse=True)
    assert len(set(orders)) == len(orders)
    assert {item["Month"]["S"] for item in items} == {"2019-05"}


def test_the_jobs_of_the_part_merge_into_one_result() -> None:
    # given the three jobs' outcomes
    results: dict[str, Any] = {}
    for outcome in (
        {"tie_break": {"entity": {"x": 1}}, "sizes": {"downloads": 5}},
        {"among": {"cases": []}, "sizes": {"downloads": 5}},
        {"tie_break": {"first_reached": {"x": 2}}, "sizes": {"downloads": 5}},
    ):
        # when
        board_features.merge_into(results, outcome)

    # then
    assert results["board_features"] == {
        "tie_break": {"entity": {"x": 1}, "first_reached": {"x": 2}},
        "among": {"cases": []},
        "sizes": {"downloads": 5},
    }


def measured_part() -> dict[str, Any]:
    lines = [count_line({"among": ["a", "b"]}, [{"operation": "BatchGetItem", "table": "t", "consistent": False}], 2)]
    lines += [
        count_line({"songID": s}, [{"operation": "Query", "table": "t", "consistent": False, "scanned": 500}], 9)
        for s in "ab"
    ]
    latencies = {"among 2": [5.0], "rank a": [20.0], "rank b": [20.0]}
    return {
        "tie_break": {"entity": side("entity", 500, 0), "first_reached": side("first_reached", 500, 500)},
        "among": {
            "month": "2019-05",
            "board": BOARD,
            "whole_board_read_units": 10.0,
            "answers_correct": True,
            "repeats": 1,
            "cases": [board_features.among_case(2, ["a", "b"], lines, latencies, BOARD, "t")],
        },
        "sizes": {"downloads": 1000},
    }


def test_the_report_shows_both_tables_in_the_results(tmp_path: Path) -> None:
    # given raw results with the board-features part
    results = raw_results()
    results["board_features"] = measured_part()

    # when the report is written
    summary = report.write_results(results, tmp_path, None)
    table = (tmp_path / "summary.md").read_text()

    # then both tables are there, with the headline ratios
    ratios = summary["board_features"]["tie_break"]["ratios"]
    assert "The tie-break `first_reached` against `entity`" in table
    assert f"**dollars {ratios['dollars']:g}**" in table
    assert "every board equals the generator's recount on both sides" in table
    assert "| `first_reached` | 50.0 | 50.0 | 500 of 500 |" in table
    assert "`among` against N `rank` requests" in table
    assert "| 2 | 0.5 | 1 | 5 | 2 | 10 | 2 | 1,000 | 40 | 18 | **20** | 8 |" in table


def test_the_report_says_when_a_side_is_not_exact() -> None:
    # given a first_reached side whose boards differ from the recount
    measured = measured_part()
    measured["tie_break"]["first_reached"] = side("first_reached", 500, 500, exact=False)

    # when
    lines = board_features.report_lines({"board_features": board_features.summarise(measured)})

    # then
    assert any("NOT exact on both sides" in line for line in lines)
    assert any(line.startswith("| `first_reached` |") and "| NO |" in line for line in lines)


def test_the_part_runs_alone_and_report_merges_its_json(tmp_path: Path) -> None:
    # given a separate run of the part beside the full run's results
    part = {"provenance": {"commit": "abc"}, "plan": {}, "board_features": measured_part(), "failures": []}
    (tmp_path / bench_main.ALONE["board-features"]).write_text(json.dumps(part))

    # when the report merges the separate parts
    merged = bench_main.with_separate_parts({}, tmp_path)

    # then the part's figures and its provenance are there, under the part's own name
    assert "board-features" in bench_main.PARTS
    assert bench_main.ALONE["board-features"] == "board_features.json"
    assert merged["board_features"] == part["board_features"]
    assert merged["separate_runs"]["board_features"]["provenance"] == {"commit": "abc"}
