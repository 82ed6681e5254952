"""`leaderboard-tools size --among-per-second`: the read side of among requests, one BatchGetItem each."""

from __future__ import annotations

import json

import pytest

from leaderboard_tools.cli import main
from leaderboard_tools.size import prices

LOAD = ["--downloads-per-second", "1000", "--songs", "10000"]


def size_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(["size", *argv])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().out


def cost_lines(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, float]]:
    code, out = size_command([*LOAD, *argv, "--json"], capsys)
    assert code == 0
    return {line["item"]: line for line in json.loads(out)["cost"]["lines"]}


def test_among_reads_half_a_read_unit_an_entity_and_adds_one_request_each(capsys: pytest.CaptureFixture[str]) -> None:
    # given 20 among requests a second of 50 entities each
    lines = cost_lines(["--among-per-second", "20", "--among-entities", "50"], capsys)

    # then each reads its 50 aggregates eventually consistent, under 4 KB each: 0.5 read units an entity
    reads = lines["among reads (one BatchGetItem of 50 aggregates)"]
    assert reads["per_second"] == pytest.approx(20 * 50 * 0.5)
    assert reads["dollars_per_month"] == pytest.approx(20 * 50 * 0.5 * prices.SECONDS_PER_MONTH * 0.125 / 1e6)
    # one Lambda request each, and 10 ms of a 256 MB function waiting for its one BatchGetItem
    assert lines["among requests"]["per_second"] == pytest.approx(20)
    assert lines["among GB-seconds"]["per_second"] == pytest.approx(20 * 0.010 * 0.25)


def test_among_defaults_to_the_most_entities_and_leaves_the_other_lines_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # given the same load with and without among requests
    plain = cost_lines([], capsys)
    among = cost_lines(["--among-per-second", "10"], capsys)

    # then the default is 100 entities a request, and nothing else changes
    assert among["among reads (one BatchGetItem of 100 aggregates)"]["per_second"] == pytest.approx(10 * 100 * 0.5)
    assert plain["among reads (one BatchGetItem of 100 aggregates)"]["per_second"] == 0
    for item, line in plain.items():
        if not item.startswith("among "):
            assert among[item]["per_second"] == pytest.approx(line["per_second"]), item


def test_the_table_shows_the_among_lines_only_when_asked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    _, with_among = size_command([*LOAD, "--among-per-second", "5", "--among-entities", "10"], capsys)
    _, without = size_command(LOAD, capsys)
    assert "among reads (one BatchGetItem of 10 aggregates)" in " ".join(with_among.split())
    assert "5 among requests/s of 10" in " ".join(with_among.split())
    assert "among reads" not in without


@pytest.mark.parametrize("entities", ["0", "101"])
def test_among_names_1_to_100_entities(entities: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = size_command([*LOAD, "--among-per-second", "1", "--among-entities", entities], capsys)
    assert code == 2
