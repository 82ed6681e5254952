"""The sizing arithmetic (aggregate updates from batches of a Zipf catalogue, index writes per partition, the hottest
song's partition, the cost a month) and `size`, the command that prints it."""

from __future__ import annotations

import argparse
import json
import random
import re
from itertools import accumulate
from pathlib import Path

import pytest

from leaderboard_tools.cli import main
from leaderboard_tools.commands import size
from leaderboard_tools.size import monthly_cost, prices, sizing
from leaderboard_tools.size.monthly_cost import cost
from leaderboard_tools.size.sizing import (
    PARTITION_WRITE_LIMIT,
    Boards,
    Workload,
    board_pressure,
    partition_load,
    recommend,
    shards_needed,
)

TERRAFORM = Path(__file__).resolve().parents[3] / "terraform"


def test_batches_of_one_update_one_aggregate_per_download() -> None:
    load = partition_load(Workload(downloads_per_second=300, songs=50, batch_size=1), 1)
    assert load.aggregate_updates_per_second == pytest.approx(300)
    assert load.index_writes_per_second == pytest.approx(600)


def test_one_song_is_updated_once_per_batch() -> None:
    load = partition_load(Workload(downloads_per_second=1000, songs=1, batch_size=100), 4)
    assert load.aggregate_updates_per_second == pytest.approx(10)
    assert load.busiest_partition_index_writes_per_second == pytest.approx(20)


def test_the_partitions_share_the_index_writes() -> None:
    workload = Workload(downloads_per_second=5000, songs=2000)
    one, eight = partition_load(workload, 1), partition_load(workload, 8)
    assert eight.index_writes_per_second == pytest.approx(one.index_writes_per_second)
    assert one.index_writes_per_second / 8 <= eight.busiest_partition_index_writes_per_second
    assert eight.busiest_partition_index_writes_per_second < one.busiest_partition_index_writes_per_second


def test_distinct_aggregates_per_batch_match_a_simulation_of_the_catalogue() -> None:
    # given the formula's expected updates per batch, and 3,000 batches drawn from the same Zipf catalogue
    workload = Workload(downloads_per_second=100, songs=1000, batch_size=100)
    expected_per_batch = partition_load(workload, 1).aggregate_updates_per_second  # one batch per second
    rng = random.Random(11)
    weights = workload.popularity()
    songs = range(len(weights))
    simulated = sum(len(set(rng.choices(songs, weights=weights, k=100))) for _ in range(3000)) / 3000
    # then they agree within 2 %
    assert simulated == pytest.approx(expected_per_batch, rel=0.02)


def test_the_fewest_shards_keep_the_busiest_partition_under_half_its_limit() -> None:
    workload = Workload(downloads_per_second=5000, songs=100_000)
    needed, load = shards_needed(workload)
    assert needed is not None
    assert load.busiest_share_of_limit <= 0.5
    assert partition_load(workload, needed - 1).busiest_share_of_limit > 0.5


def test_no_shard_count_helps_when_one_song_alone_writes_too_often() -> None:
    # 30,000 downloads/s in batches of 10: the top song's aggregate is written in nearly every batch
    needed, load = shards_needed(Workload(downloads_per_second=30_000, songs=1000, batch_size=10))
    assert needed is None
    assert load.busiest_share_of_limit > 0.5


def test_windows_write_each_aggregate_at_most_once_per_window() -> None:
    load = partition_load(Workload(1000, songs=10, aggregate_writes="per_window", window_seconds=5), 1)
    assert load.aggregate_updates_per_second == pytest.approx(10 / 5, rel=0.01)


def test_every_period_board_takes_the_month_boards_load_and_the_table_takes_them_all() -> None:
    # given 5,000 downloads/s kept in day, month and all-time boards, and the same with ten categories
    workload = Workload(downloads_per_second=5000, songs=1000)
    month_only = board_pressure(workload, Boards(periods=1), 4)
    three = board_pressure(workload, Boards(periods=3), 4)
    with_categories = board_pressure(workload, Boards(periods=3, categories=10), 4)
    # then each overall board is as hot as the month's, and the table's updates triple, then double again
    assert three.overall_board == month_only.overall_board
    assert three.aggregate_updates_per_second == pytest.approx(3 * month_only.aggregate_updates_per_second)
    assert with_categories.aggregate_updates_per_second == pytest.approx(6 * month_only.aggregate_updates_per_second)
    # and a category board is cooler than the overall board, while the hottest song's partition grows
    assert with_categories.busiest_category_board_index_writes_per_second is not None
    assert (
        with_categories.busiest_category_board_index_writes_per_second
        < with_categories.overall_board.busiest_partition_index_writes_per_second
    )
    assert month_only.hottest_entity_writes_per_second < three.hottest_entity_writes_per_second
    assert three.hottest_entity_writes_per_second < with_categories.hottest_entity_writes_per_second


def test_the_hottest_songs_partition_takes_its_downloads_and_one_update_per_board_and_batch() -> None:
    workload = Workload(downloads_per_second=1000, songs=1, batch_size=100)
    pressure = board_pressure(workload, Boards(periods=6, categories=2), 1)
    # one song: 1,000 downloads/s written raw, and 10 batches/s each updating its 12 boards
    assert pressure.hottest_entity_writes_per_second == pytest.approx(1000 + 10 * 12)


# ---------------------------------------------------------------------------------------------- size, the command


def size_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`leaderboard-tools size ...`: its exit code (argparse's included), stdout and stderr."""
    try:
        code = main(["size", *argv])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(("aggregate_writes", "batch_size"), [("per_batch", 100), ("per_window", 1000)])
def test_without_a_batch_size_size_takes_the_modules_default_for_the_write_mode(
    aggregate_writes: str, batch_size: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a load sized without --batch-size
    flags = ["--downloads-per-second", "1000", "--songs", "1000", "--aggregate-writes", aggregate_writes, "--json"]
    # when size runs
    code, out, _ = size_command(flags, capsys)
    # then it sizes the batches the module would give the mapping for that write mode
    assert code == 0
    assert json.loads(out)["workload"]["batch_size"] == batch_size


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--songs", "0"], "--songs"),
        (["--songs", "-3"], "--songs"),
        (["--songs", "1e3"], "--songs"),
        (["--categories", "-2"], "--categories"),
        (["--batch-size", "0"], "--batch-size"),
        (["--batch-size", "10001"], "--batch-size"),
        (["--aggregate-writes", "per_window", "--window", "0"], "--window"),
        (["--window", "901"], "--window"),
        (["--downloads-per-second", "-5"], "--downloads-per-second"),
        (["--downloads-per-second", "0"], "--downloads-per-second"),
        (["--downloads-per-second", "nan"], "--downloads-per-second"),
        (["--downloads-per-second", "inf"], "--downloads-per-second"),
        (["--target-share", "2"], "--target-share"),
        (["--target-share", "0"], "--target-share"),
        (["--periods", "fortnight"], "--periods"),
        (["--periods", "month,month"], "--periods"),
        (["--periods", ""], "--periods"),
        (["--zipf-exponent", "-1"], "--zipf-exponent"),
        (["--zipf-exponent", "1e6"], "--zipf-exponent"),
        (["--queries-per-second", "-1"], "--queries-per-second"),
    ],
)
def test_what_the_module_would_refuse_or_means_nothing_is_a_usage_error_in_one_line(
    flags: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # when size is given a flag outside the module's limits (or no number at all), the others valid
    base = {"--downloads-per-second": "100", "--songs": "100"}
    argv = [part for flag, value in base.items() if flag not in flags for part in (flag, value)] + flags
    code, out, err = size_command(argv, capsys)
    # then argparse refuses it (exit 2) in one error line naming the flag: no traceback, no table of nan
    assert code == 2
    assert out == ""
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert named in errors[0]
    assert "Traceback" not in err


def test_the_workload_refuses_what_the_command_line_refuses() -> None:
    for wrong in (
        {"downloads_per_second": -5, "songs": 10},
        {"downloads_per_second": float("nan"), "songs": 10},
        {"downloads_per_second": 10, "songs": 0},
        {"downloads_per_second": 10, "songs": 10, "batch_size": 0},
        {"downloads_per_second": 10, "songs": 10, "window_seconds": 0},
        {"downloads_per_second": 10, "songs": 10, "aggregate_writes": "per_day"},
    ):
        with pytest.raises(ValueError, match="not a workload"):
            Workload(**wrong)  # type: ignore[arg-type]


@pytest.mark.parametrize("boards", [[], ["--categories", "10"]])
def test_a_load_whose_hottest_song_is_over_a_partitions_limit_gets_no_shards_and_exit_1(
    boards: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # given 5,000 downloads/s over 100 songs: the index fits 11 shards, but the most popular song's partition
    # (its 1,169 downloads/s and 50 aggregate updates/s per board) is over the 1,000 writes/s a partition takes
    code, out, _ = size_command(["--downloads-per-second", "5000", "--songs", "100", *boards, "--json"], capsys)
    answer = json.loads(out)
    # then size recommends nothing, says why, and exits 1 (it once printed "leaderboard_shards = 11" and exited 0)
    assert code == 1
    assert answer["leaderboard_shards"] is None
    assert answer["fits"] is False
    assert answer["too_hot"] == ["partition_key"]
    assert answer["hottest_entity_writes_per_second"] > PARTITION_WRITE_LIMIT
    assert "No number of shards fits" in answer["verdict"][0]
    # and its table says so too, beside the figures
    code, out, _ = size_command(["--downloads-per-second", "5000", "--songs", "100", *boards], capsys)
    assert code == 1
    assert "leaderboard_shards =" not in out
    assert "No number of shards fits" in " ".join(out.split())


@pytest.mark.parametrize(
    "workload",
    [
        Workload(downloads_per_second=rate, songs=songs, batch_size=batch)
        for rate in (100, 1000, 5000, 20_000)
        for songs in (10, 100, 10_000)
        for batch in (1, 100, 1000)
    ]
    + [Workload(5000, songs=1000, aggregate_writes="per_window", window_seconds=10)],
)
def test_a_recommendation_keeps_every_partition_under_its_limit(workload: Workload) -> None:
    for boards, separate in ((Boards(), False), (Boards(periods=3, categories=8), False), (Boards(3, 8), True)):
        answer = recommend(workload, boards, separate_aggregates_table=separate)
        assert answer.rows[-1].shards == answer.shown  # the number recommended (or the most) is a row of the table
        if answer.leaderboard_shards is None:
            assert answer.too_hot
            continue
        pressure = answer.pressure
        assert pressure.overall_board.busiest_share_of_limit <= 0.5
        assert (pressure.busiest_category_board_index_writes_per_second or 0) <= 0.5 * PARTITION_WRITE_LIMIT
        assert pressure.hottest_entity_writes_per_second <= PARTITION_WRITE_LIMIT
        assert answer.leaderboard_shards == shards_needed(workload)[0]


def test_the_number_recommended_is_a_row_of_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    # given 5,000 downloads/s over 100,000 songs, which need 19 shards
    code, out, _ = size_command(["--downloads-per-second", "5000", "--songs", "100000", "--output", "text"], capsys)
    assert code == 0
    records = [line.split("\t") for line in out.splitlines()]
    # then the rows are 1, 2, 4, 8, 16 and 19 itself
    assert [int(record[1]) for record in records if record[0] == "shards"] == [1, 2, 4, 8, 16, 19]
    assert ["leaderboard_shards", "19"] in records
    code, out, _ = size_command(["--downloads-per-second", "5000", "--songs", "100000"], capsys)
    assert re.search(r"^\W*19\W+3,434\W+6,868\W+499/s\W+50%", out, flags=re.MULTILINE), out
    assert "leaderboard_shards = 19" in out


def test_the_category_boards_are_placed_as_the_module_places_their_aggregates() -> None:
    # given 10 songs, each in a category of its own, over 4 shards
    workload = Workload(downloads_per_second=1000, songs=10, batch_size=10)
    pressure = board_pressure(workload, Boards(categories=10), 4)
    # then a category's busiest partition is its one song's: two index writes per update
    updates = workload.updates_per_second()
    assert pressure.busiest_category_board_index_writes_per_second == pytest.approx(2 * max(updates))


def test_a_separate_aggregates_table_splits_the_hottest_songs_partition_in_two() -> None:
    workload = Workload(downloads_per_second=1000, songs=1, batch_size=100)
    one_table = board_pressure(workload, Boards(periods=6, categories=2), 1)
    two_tables = board_pressure(workload, Boards(periods=6, categories=2), 1, separate_aggregates_table=True)
    assert one_table.hottest_entity_writes_per_second == pytest.approx(1000 + 10 * 12)
    assert two_tables.hottest_entity_writes_per_second == pytest.approx(1000)


# ----------------------------------------------------------------------------------------------------- the cost

BENCH = Path(__file__).resolve().parents[3] / "development" / "benchmark-results"


def test_the_cost_per_million_downloads_agrees_with_the_benchmarks() -> None:
    # given the benchmark's cost per million downloads (1,000 songs, Zipf 1.1, the month board, batch 100 and 1,000),
    # and the batches its loads delivered (a batch of 1,000 held 909 records on average)
    summary = json.loads((BENCH / "summary.json").read_text())
    delivered = {check["batch_size"]: round(check["mean_batch"]) for check in summary["sizing_check"]}
    rows = [
        row
        for row in summary["cost_per_million_downloads"]["rows"]
        if (row["aggregator"], row["configuration"]) == ("ours_per_batch", "month") and row["batch_size"] in (100, 1000)
    ]
    assert len(rows) == 2
    for row in rows:
        # when size prices a million downloads of the same load, in the batches delivered
        workload = Workload(downloads_per_second=1e6, songs=1000, batch_size=delivered[row["batch_size"]])
        lines = {line.item: line.per_second for line in cost(recommend(workload, Boards())).lines}
        # then its writes are the benchmark's (the sizing arithmetic agrees with the measured writes within 3 %), its
        # invocations those of full batches (the benchmark's also count a window's final ones), and its Lambda
        # seconds within a quarter of the benchmark's derivation
        assert lines["downloads written (the application's)"] + lines["aggregate writes"] == pytest.approx(
            row["table_writes"], rel=0.03
        )
        assert lines["index writes"] == pytest.approx(row["index_writes"], rel=0.03)
        assert lines["aggregator requests"] == pytest.approx(row["lambda_requests"], rel=0.2)
        assert lines["aggregator GB-seconds"] == pytest.approx(row["lambda_gb_seconds"], rel=0.25)


def test_the_cpu_model_reproduces_each_measurement_of_the_benchmark() -> None:
    cases = json.loads((BENCH / "results.json").read_text())["handler_cpu"]["cases"]
    ours = [case for case in cases if case["aggregator"] == "ours_per_batch"]
    assert len(ours) == 7
    for case in ours:
        records = case["downloads"] / case["invocations"]
        modelled = (
            sizing.CPU_MS_PER_RECORD * records
            + sizing.CPU_MS_PER_AGGREGATE_WRITE * case["aggregate_writes_per_invocation"]
        )
        assert 0.86 <= modelled / case["cpu_ms_per_invocation"] <= 1.14, case
        # and the calls each invocation waited for are the model's
        calls = case["calls_per_invocation"]
        assert calls["GetRecords"] == monthly_cost.get_records_per_invocation(int(records))
        assert case["sequential_calls_per_invocation"] == sizing.CALLS_IN_LINE_BESIDE_GET_RECORDS + calls["GetRecords"]


def test_the_cost_lines_are_the_units_times_the_price(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = size_command(
        ["--downloads-per-second", "1000", "--songs", "100000", "--queries-per-second", "50", "--json"], capsys
    )
    answer = json.loads(out)
    assert code == 0
    assert answer["leaderboard_shards"] == 3
    lines = {line["item"]: line for line in answer["cost"]["lines"]}
    month = prices.SECONDS_PER_MONTH
    assert lines["index writes"]["per_second"] == pytest.approx(2 * lines["aggregate writes"]["per_second"])
    assert lines["aggregate writes"]["dollars_per_month"] == pytest.approx(
        lines["aggregate writes"]["per_second"] * month * 0.625 / 1e6
    )
    # one invocation per batch of 100: a progress write, a consistent progress read, one GetRecords, one request
    for item in ("progress table writes", "progress table reads", "stream reads (the aggregator's GetRecords)"):
        assert lines[item]["per_second"] == pytest.approx(10)
    assert lines["stream reads (the aggregator's GetRecords)"]["dollars_per_month"] == pytest.approx(
        10 * month * 0.02 / 1e5
    )
    # the query side: one eventually consistent read unit per two partitions read, one request per page
    assert lines["index reads (top-10 pages)"]["per_second"] == pytest.approx(50 * 3 * 0.5)
    assert lines["query requests"]["per_second"] == pytest.approx(50)
    assert answer["cost"]["dollars_per_month"] == pytest.approx(
        answer["cost"]["module_dollars_per_month"] + lines["downloads written (the application's)"]["dollars_per_month"]
    )
    # and the price table comes with it, the unconfirmed price named
    assert answer["prices"]["region"] == "us-east-1"
    assert "DynamoDB Streams read request unit (one GetRecords call)" in answer["prices"]["unconfirmed"]


def test_the_table_prints_the_cost_and_the_price_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # every cell on one line
    code, out, _ = size_command(["--downloads-per-second", "1000", "--songs", "100000"], capsys)
    text = " ".join(out.split())
    assert code == 0
    assert "What it costs a month" in text
    assert "the module" in text
    assert "Prices (us-east-1, on demand" in text
    assert "NOT CONFIRMED" in text
    for price in prices.PRICES:
        assert price.unit in text


# ------------------------------------------------------------------------------------------------------- --help


def test_size_has_a_description_and_every_flag_a_help_text() -> None:
    parser = argparse.ArgumentParser(prog="leaderboard-tools")
    commands = parser.add_subparsers(dest="command")
    size.register(commands)
    command = commands.choices["size"]
    assert command.description
    assert "leaderboard_shards" in command.description
    assert "Exit codes" in command.description
    for action in command._actions:
        assert action.help, action.option_strings


# ------------------------------------------------------------------------------- edits and deletions (retractions)


def simulated_writes_per_batch(workload: Workload, batches: int, seed: int) -> float:
    """Batches drawn record by record: a download, a deletion or an edit in their shares, of a song by popularity; a
    batch writes each distinct aggregate once: a song's current one for its downloads, the one its deletions leave,
    and the ones its edits leave and enter (other buckets than the current one)."""
    rng = random.Random(seed)
    kinds = ["download", "deletion", "edit"]
    weights = [1, workload.delete_share, workload.edit_share]
    songs = range(workload.songs)
    popularity = list(accumulate(workload.popularity()))
    written = 0
    for _ in range(batches):
        aggregates = set()
        records = zip(
            rng.choices(kinds, weights=weights, k=workload.batch_size),
            rng.choices(songs, cum_weights=popularity, k=workload.batch_size),
            strict=True,
        )
        for kind, song in records:
            if kind == "download":
                aggregates.add((song, "current"))
            elif kind == "deletion":
                aggregates.add((song, "left by a deletion"))
            else:
                aggregates |= {(song, "left by an edit"), (song, "entered by an edit")}
        written += len(aggregates)
    return written / batches


@pytest.mark.parametrize(("edits", "deletions"), [(0.1, 0.05), (0.5, 0.0), (0.0, 0.3), (1.0, 1.0)])
def test_aggregate_writes_with_edits_and_deletions_match_a_simulation_of_the_batches(
    edits: float, deletions: float
) -> None:
    # given 100 downloads a second over 1,000 songs, some later edited or deleted, in batches of 100 records
    workload = Workload(downloads_per_second=100, songs=1000, batch_size=100, edit_share=edits, delete_share=deletions)
    batches_per_second = 100 * (1 + edits + deletions) / 100
    # when the formula's writes per batch are compared with 2,000 batches drawn record by record
    expected_per_batch = partition_load(workload, 1).aggregate_updates_per_second / batches_per_second
    simulated = simulated_writes_per_batch(workload, 2000, seed=28)
    # then they agree within 2 %
    assert simulated == pytest.approx(expected_per_batch, rel=0.02)


def test_with_batches_of_one_record_an_edit_writes_two_aggregates_and_a_deletion_one() -> None:
    # given one song, every record its own batch: nothing coalesces
    workload = Workload(downloads_per_second=1000, songs=1, batch_size=1, edit_share=0.1, delete_share=0.05)
    # then a second's 1,000 downloads, 100 edits and 50 deletions write 1,000 + 2 x 100 + 50 aggregates
    assert partition_load(workload, 1).aggregate_updates_per_second == pytest.approx(1250)


def test_without_edits_or_deletions_the_load_is_the_downloads_alone() -> None:
    plain = Workload(downloads_per_second=5000, songs=100_000)
    explicit = Workload(downloads_per_second=5000, songs=100_000, edit_share=0.0, delete_share=0.0)
    assert partition_load(explicit, 19) == partition_load(plain, 19)
    assert explicit.invocations_per_second == pytest.approx(50)


def test_each_edit_and_deletion_is_one_more_stream_record_to_invoke_on_read_and_checkpoint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given 1,000 downloads a second, 10 % later edited and 5 % deleted, in batches of 100 records
    code, out, _ = size_command(
        [
            "--downloads-per-second",
            "1000",
            "--songs",
            "100000",
            "--edit-share",
            "0.1",
            "--delete-share",
            "0.05",
            "--json",
        ],
        capsys,
    )
    answer = json.loads(out)
    assert code == 0
    lines = {line["item"]: line["per_second"] for line in answer["cost"]["lines"]}
    # then 1,150 records a second make 11.5 invocations, each a progress write and read and one GetRecords
    assert answer["workload"]["records_per_second"] == pytest.approx(1150)
    for item in ("progress table writes", "progress table reads", "stream reads (the aggregator's GetRecords)"):
        assert lines[item] == pytest.approx(11.5)
    assert lines["aggregator requests"] == pytest.approx(11.5)
    # and the application's edits and deletions are its writes, shown apart from the module's
    assert lines["downloads edited and deleted (the application's)"] == pytest.approx(150)
    # and the aggregate writes are more than the downloads alone make
    code, out, _ = size_command(["--downloads-per-second", "1000", "--songs", "100000", "--json"], capsys)
    alone = {line["item"]: line["per_second"] for line in json.loads(out)["cost"]["lines"]}
    assert lines["aggregate writes"] > alone["aggregate writes"]
    assert alone["downloads edited and deleted (the application's)"] == 0


def test_the_hottest_partition_takes_the_applications_edits_and_deletions_of_its_downloads() -> None:
    # given one song, 1,000 downloads a second, a fifth of them later edited and a tenth deleted, in batches of 100
    workload = Workload(downloads_per_second=1000, songs=1, batch_size=100, edit_share=0.2, delete_share=0.1)
    pressure = board_pressure(workload, Boards(), 1)
    # then its partition takes 1,300 item writes and, in 13 batches a second, 4 aggregate writes each
    assert pressure.hottest_entity_downloads_per_second == pytest.approx(1300)
    # (a batch of 100 holds a deletion and an edit but for about one chance in 3,000)
    assert pressure.hottest_entity_writes_per_second == pytest.approx(1300 + 13 * 4, rel=1e-3)


@pytest.mark.parametrize("flag", ["--edit-share", "--delete-share"])
@pytest.mark.parametrize("value", ["-0.1", "1.5", "nan", "ten percent"])
def test_a_share_outside_0_to_1_is_a_usage_error_naming_the_flag(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = size_command(["--downloads-per-second", "100", "--songs", "100", flag, value], capsys)
    assert (code, out) == (2, "")
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1
    assert flag in errors[0]


def test_the_workload_refuses_a_share_outside_0_to_1() -> None:
    for wrong in ({"edit_share": -0.1}, {"delete_share": 2.0}, {"edit_share": float("nan")}):
        with pytest.raises(ValueError, match="not a workload"):
            Workload(downloads_per_second=10, songs=10, **wrong)  # type: ignore[arg-type]


def test_the_help_says_what_edits_and_deletions_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = size_command(["--help"], capsys)
    text = " ".join(out.split())
    assert code == 0
    assert "--edit-share" in text
    assert "--delete-share" in text
    assert "retractions = true" in text
    assert "one more stream record" in text


# ------------------------------------------------------------------------------------------------------ ledger mode

LEDGER_LINE = "ledger writes (one conditional write per download key and step)"


def test_ledger_mode_is_one_conditional_write_per_stream_record_at_the_write_price(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given 1,000 downloads a second, 10 % later edited and 5 % deleted, in batches of 100, with and without the ledger
    load = ["--downloads-per-second", "1000", "--songs", "100000", "--edit-share", "0.1", "--delete-share", "0.05"]
    code, out, _ = size_command([*load, "--ledger", "--json"], capsys)
    ledger = json.loads(out)
    _, out, _ = size_command([*load, "--json"], capsys)
    plain = json.loads(out)
    lines = {line["item"]: line for line in ledger["cost"]["lines"]}
    plain_lines = {line["item"]: line for line in plain["cost"]["lines"]}
    # then the ledger takes one write per stream record (1,150 a second), priced as a write request unit, the module's
    assert code == 0
    assert ledger["workload"]["ledger"] is True
    assert lines[LEDGER_LINE]["per_second"] == pytest.approx(1150)
    assert lines[LEDGER_LINE]["dollars_per_month"] == pytest.approx(1150 * prices.SECONDS_PER_MONTH * 0.625 / 1e6)
    assert lines[LEDGER_LINE]["module"] is True
    # and without it there is no ledger write; the rest of DynamoDB's bill is the same, the aggregator's time longer
    assert plain_lines[LEDGER_LINE]["per_second"] == 0
    for item in ("aggregate writes", "index writes", "progress table writes", "aggregator requests"):
        assert lines[item]["per_second"] == pytest.approx(plain_lines[item]["per_second"])
    assert lines["aggregator GB-seconds"]["per_second"] > plain_lines["aggregator GB-seconds"]["per_second"]
    assert ledger["cost"]["module_dollars_per_month"] > (
        plain["cost"]["module_dollars_per_month"] + lines[LEDGER_LINE]["dollars_per_month"]
    )


def test_a_million_downloads_in_ledger_mode_cost_0_625_dollars_more_in_ledger_writes() -> None:
    # given a million downloads a second, none edited or deleted, with the ledger
    workload = Workload(downloads_per_second=1e6, songs=1000, ledger=True)
    lines = {line.item: line for line in cost(recommend(workload, Boards())).lines}
    # then a second of them writes the ledger a million times: $0.625 at the price table's write request unit
    line = lines[LEDGER_LINE]
    assert line.per_second == pytest.approx(1e6)
    assert line.per_second * line.price.per_unit == pytest.approx(0.625)


def test_the_table_shows_the_ledger_line_only_in_ledger_mode(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    _, with_ledger, _ = size_command(["--downloads-per-second", "1000", "--songs", "1000", "--ledger"], capsys)
    _, without, _ = size_command(["--downloads-per-second", "1000", "--songs", "1000"], capsys)
    assert "ledger writes (one conditional write per download key and step)" in " ".join(with_ledger.split())
    assert "ledger, per_batch" in " ".join(with_ledger.split())
    assert "ledger writes" not in without


def test_first_reached_is_one_strongly_consistent_read_per_aggregate_write_and_no_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given 1,000 downloads a second over 10,000 songs, with and without the tie-break first_reached
    load = ["--downloads-per-second", "1000", "--songs", "10000", "--json"]
    code, out, _ = size_command([*load, "--tie-break", "first_reached"], capsys)
    first_reached = {line["item"]: line for line in json.loads(out)["cost"]["lines"]}
    _, out, _ = size_command(load, capsys)
    plain = {line["item"]: line for line in json.loads(out)["cost"]["lines"]}
    reads = next(item for item in first_reached if item.startswith("aggregate reads"))
    # then it reads each aggregate once per write, at the read request unit, and writes exactly as much
    assert code == 0
    assert first_reached[reads]["per_second"] == pytest.approx(first_reached["aggregate writes"]["per_second"])
    assert first_reached[reads]["dollars_per_month"] == pytest.approx(
        first_reached[reads]["per_second"] * prices.SECONDS_PER_MONTH * 0.125 / 1e6
    )
    assert plain[reads]["per_second"] == 0
    for item in ("aggregate writes", "index writes", "progress table writes"):
        assert first_reached[item]["per_second"] == pytest.approx(plain[item]["per_second"])
