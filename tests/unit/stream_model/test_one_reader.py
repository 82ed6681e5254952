"""Ledger mode with one reader per shard (tests/stream_model/one_reader_design.py), played on the stream model.

The handler applies only what the mapping delivers: a versioned ledger item per download key decides whether a record
moves anything. The quick tests play the stories that show each rule (a retry out of order, a batch given up and read
back by recover, a direct invocation, a pause past the retention), the naive variants' stories and the kept ledger
histories; the slow one plays random ledger histories with the mapping the design asks for (MaximumRetryAttempts and
MaximumRecordAgeInSeconds -1), sized by MODEL_HISTORIES as every ledger design's (test_exactly_once.py plays this
design under the histories' own mappings, as one of LEDGER_DESIGNS).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from aggregator_settings import PER_BATCH, PER_WINDOW
from tests.stream_model import naive_designs as naive
from tests.stream_model.aws_delivery import HAZARDS
from tests.stream_model.environment import Environment
from tests.stream_model.histories import (
    BOARDS,
    LEDGER_KINDS,
    Backfill,
    Config,
    Delete,
    Deliver,
    Direct,
    Edit,
    History,
    Pause,
    Reshard,
    Rewrite,
    Wait,
    Write,
    play,
)
from tests.stream_model.one_reader_design import HAZARDS_IT_NEVER_MEETS, OneReaderDesign, one_reader, with_its_mapping
from tests.stream_model.regressions import (
    LEDGER,
    LEDGER_HISTORIES,
    LEDGER_STORIES,
    ONE_READER_HISTORIES,
    ONE_READER_UNORDERED_EXPIRIES,
)
from tests.unit.stream_model.test_exactly_once import explore

HISTORIES = int(os.environ.get("MODEL_HISTORIES", "1000"))
MODES = (PER_BATCH, PER_WINDOW)
ONE_READER_STORIES = {name: story for name, story in LEDGER_STORIES.items() if story[0].startswith("OneReader")}
NOT_REQUIRED = {
    "expired iterator",
    "timed out",
    "larger retry",
    "direct behind the mapping",
    "failure queue refused a send",
}
"""As for every ledger design (test_exactly_once.py): tracked, not required."""
GIVEN_UP = {"batch given up", "retry quota 0", "record-age discard", "window given up", "records expired"}
"""What a mapping retried until the records expire gives up only when they do, which few histories reach."""
KEPT = {**LEDGER_HISTORIES, **ONE_READER_HISTORIES, **{name: story[1] for name, story in LEDGER_STORIES.items()}}


@pytest.mark.parametrize("name", list(ONE_READER_STORIES))
def test_a_naive_one_reader_design_breaks_on_its_story_and_the_one_reader_design_does_not(name: str) -> None:
    # given a naive way of keeping the versioned ledger, and a ledger history that shows what it ignores
    design_name, history, expected = ONE_READER_STORIES[name]
    # when the naive design and the one-reader design play it
    broken = play(history, naive.factory(getattr(naive, design_name)))
    exact = play(history, one_reader)
    # then the naive design loses or over-counts as its docstring says, and the one-reader design is exact
    assert any(expected in problem for problem in broken.problems()), broken.summary()
    assert exact.problems() == [], exact.summary()


@pytest.mark.parametrize("name", list(KEPT))
def test_a_kept_ledger_history_is_exact_on_the_one_reader_design(name: str) -> None:
    # given a ledger history kept for what it shows (an issue's finding, or a naive ledger design's story)
    history = KEPT[name]
    # when the one-reader design plays it, an operator's backfill run to its end after the steps
    outcome = play(history, one_reader)
    # then every board equals the recount of the table's last items, and ranks as it does
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


@pytest.mark.parametrize("name", list(ONE_READER_UNORDERED_EXPIRIES))
def test_an_expiry_refused_for_a_lineage_a_pause_cut_stays_counted_by_its_own_item(name: str) -> None:
    # given a ledger history whose key's expiry is delivered in a shard whose lineage no longer reaches the shard of
    # the key's Version (a pause skipped a whole shard), refused and reported
    history = ONE_READER_UNORDERED_EXPIRIES[name]
    # when the one-reader design plays it and recover rebases the ledger, the operator answering the gone report as it
    # asks
    outcome = play(history, one_reader)
    # then every board equals the recount: the expired download counts as it expired, by the expiry's own item
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


def test_a_rewrite_after_an_expiry_a_pause_cut_from_its_lineage_counts_beside_the_expired_download() -> None:
    # given nine downloads, one delivery, two more, a pause past the retention (two rollovers: the shard between the
    # delivered one and the next is deleted unlisted), then the seventh download, delivered before the pause, expired by
    # TTL and its key written again: both records refused, no known lineage placing them against the key's Version
    history = History(
        Config(
            window_seconds=5,
            batch_size=10,
            maximum_retry_attempts=None,
            maximum_record_age=None,
            aggregate_writes=PER_BATCH,
            songs=4,
            timestamps=9,
            retractions=True,
            ledger=True,
            history=6,
        ),
        (*(Write(),) * 9, Deliver(), Write(), Write(), Pause(rollovers=2), Delete(pick=6, ttl=True), Rewrite()),
    )
    # when the one-reader design plays it and recover rebases the ledger
    outcome = play(history, one_reader)
    # then every board equals the recount: the expired download counts as it expired (its own item, kept though the
    # record was refused), the rewrite once (the rebase moves the key to its item)
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


def test_an_aggregate_a_killed_invocation_left_at_0_leaves_the_index_when_recover_finds_its_key_gone() -> None:
    # given a history found at 5,000 histories (per_batch): an edit back of song1's download-00012 from 2018-02-15 to
    # January is applied and the invocation killed before its index step (2018-02-15 and 2018-W07 at 0, still listed,
    # its ledger item's Decreased naming them); its batch is never retried (the records age past 3,600 s: given up,
    # then trimmed before recover reads it back), and the item expires by TTL, undelivered
    history = History(
        Config(
            window_seconds=5,
            batch_size=10,
            maximum_retry_attempts=3,
            maximum_record_age=3600,
            aggregate_writes=PER_BATCH,
            songs=4,
            timestamps=9,
            boards="periods and a category",
            retractions=True,
            ledger=True,
            history=12,
        ),
        (
            *(Write(),) * 3,
            Reshard(),
            Edit(pick=12),
            Backfill(),
            Delete(),
            Write(),
            Edit(change="plays"),
            Backfill(),
            Write(),
            Reshard(),
            Write(),
            Pause(faulted_sweeps=True),
            Write(),
            Deliver(),
            Write(),
            Edit(change="back"),
            *(Write(),) * 3,
            Direct(),
            Reshard(),
            Write(),
            Write(),
            Deliver(fault="killed", at=5),
            Write(),
            Delete(pick=10, ttl=True),
            Write(),
            Write(),
            Wait(seconds=90000),
        ),
    )
    # when the one-reader design plays it and recover rebases the ledger
    outcome = play(history, one_reader)
    # then every board equals the recount, and no aggregate at 0 is listed in the index: the rebase found the key
    # gone and settled its Decreased as the handler's index step would have
    assert outcome.problems() == [], f"{outcome.summary()}\n{history!r}"


def test_an_older_record_retried_after_a_newer_one_changes_nothing() -> None:
    # given a download and its edit into the next month, delivered and applied, the response lost
    history = History(LEDGER, (Write(), Edit(change="when", to=1), Deliver(fault="lost_response"), Deliver(order=1)))
    # when the mapping retries them in reverse order: the edit, then the INSERT it follows
    outcome = play(history, one_reader)
    # then the INSERT is not after the key's Version and moves nothing: the download counts in its new month only
    assert "reordered retry" in outcome.hazards
    assert outcome.problems() == [], outcome.summary()


def test_a_batch_the_mapping_gives_up_is_read_back_by_recover_and_applied() -> None:
    # given a mapping that retries nothing, and a counted download whose edit into the next month meets a killed
    # invocation (the backfill after the steps skips the key: its ledger item is the stream's)
    steps = (Write(), Deliver(), Edit(change="when", to=1), Deliver(fault="killed"))
    history = History(replace(LEDGER, maximum_retry_attempts=0), steps)
    # when the mapping gives the batch up (the on-failure record names its range only) and recover runs
    outcome = play(history, one_reader)
    # then the edit was missing before recover, named by the failure record, and applied by recover's read
    assert "batch given up" in outcome.hazards
    assert (outcome.lost_before, outcome.uncovered, outcome.lost, outcome.over) == (1, 0, 0, 0), outcome.summary()


def test_a_direct_invocation_is_refused_and_counts_nothing() -> None:
    # given a download delivered, and an operator's direct invocation with records the stream does not hold
    history = History(LEDGER, (Write(), Deliver(), Direct(kind="invented", count=3)))
    # when the one-reader design plays it
    outcome = play(history, one_reader)
    # then nothing invented is counted: only the mapping's events are applied
    assert "direct invented records" in outcome.hazards
    assert outcome.problems() == [], outcome.summary()


def test_records_trimmed_during_a_pause_are_reported_without_reading_the_stream() -> None:
    # given a mapping paused past the retention while downloads are written, with no scheduled check meanwhile and
    # nothing written after it (no later delivery of the shard shows the gap)
    history = History(LEDGER, (Write(), Deliver(), Pause(hours=25, writes_after=False)))
    reads: Counter[str] = Counter()
    designs: list[OneReaderDesign] = []

    def counting_reads(env: Environment, config: Any) -> OneReaderDesign:
        for operation in ("get_shard_iterator", "get_records"):
            setattr(env.streams, operation, _counted(reads, operation, getattr(env.streams, operation)))
        designs.append(one_reader(env, config))
        return designs[-1]

    # when the one-reader design plays it and recover acts on what it reported
    outcome = play(history, counting_reads)
    # then the records the mapping skipped were reported (records_trimmed: recover recounts), every board ends exact,
    # and no shard was read
    assert "mapping paused past the retention" in outcome.hazards
    assert designs[0].env.queue.of_kind("records_trimmed") != []
    assert outcome.uncovered == 0, outcome.summary()
    assert outcome.problems() == [], outcome.summary()
    assert reads == Counter()


def test_a_download_written_and_expired_within_a_range_trimmed_before_delivery_is_reported_not_repaired() -> None:
    # given a download written and expired by TTL, both records trimmed during a pause past the retention before the
    # mapping delivered them: its item is gone and no ledger item holds it, while the truth counts it (an expiry
    # never changes a count)
    history = History(LEDGER, (Write(), Delete(ttl=True), Pause()))
    designs: list[OneReaderDesign] = []

    def kept(env: Environment, config: Any) -> OneReaderDesign:
        designs.append(one_reader(env, config))
        return designs[-1]

    # when the one-reader design plays it and recover rebases the ledger
    outcome = play(history, kept)
    # then the boards miss that download alone, beyond what the tables hold, and the design reported the trimmed range
    # (the oracle allows the miss only where a report names the expiry's shard and range)
    assert designs[0].env.queue.of_kind("records_trimmed") != []
    assert (outcome.beyond_the_tables, outcome.silent_trims) == (1, 0), outcome.summary()
    assert outcome.problems() == [], outcome.summary()


def test_an_expiry_trimmed_before_delivery_that_no_report_names_is_a_problem_though_trims_were_reported() -> None:
    # given the same history, played by the one-reader design whose records_trimmed reports name a range above every
    # record of their shard (recover still rebases the whole ledger on them)
    history = History(LEDGER, (Write(), Delete(ttl=True), Pause()))
    # when it plays
    outcome = play(history, _reporting_elsewhere)
    # then the expired download is missing and no report names its range: the model fails it
    assert outcome.silent_trims == 1, outcome.summary()
    assert "1 expiries trimmed before delivery, no report naming their range" in outcome.problems()
    assert "1 lost after recover" in outcome.problems()


def _reporting_elsewhere(env: Environment, config: Any) -> OneReaderDesign:
    """The one-reader design, each of its records_trimmed reports moved above every record of its shard."""
    send = env.queue.send_message_batch

    def elsewhere(**parameters: Any) -> Any:
        entries = []
        for entry in parameters["Entries"]:
            body = json.loads(entry["MessageBody"])
            if body.get("kind") == "records_trimmed":
                body = {**body, "checkpoint": str(10**39), "firstReadableSequence": None, "lostAncestorOf": None}
            entries.append({**entry, "MessageBody": json.dumps(body)})
        return send(**{**parameters, "Entries": entries})

    env.queue.send_message_batch = elsewhere  # type: ignore[method-assign]
    return one_reader(env, config)


def _counted(reads: Counter[str], operation: str, call: Any) -> Any:
    def counted(**parameters: Any) -> Any:
        reads.update([operation])
        return call(**parameters)

    return counted


def _explore(mode: str, examples: int, chunk: int, mapping_as_asked: bool) -> Counter[str]:
    """Play seeded random ledger histories (half of them on one aggregate); fail with the shrunk history."""
    mapped = with_its_mapping if mapping_as_asked else None
    return explore(one_reader, (mode,), examples, chunk, boards=tuple(BOARDS), ledger=True, mapped=mapped)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_one_reader_design_is_exact_under_every_ledger_history_with_the_mapping_retrying_until_expiry(
    mode: str,
) -> None:
    # given seeded random ledger histories with the hazards AWS documents (retries in any order, bisection, duplicates,
    # splits, children numbered lower, pauses past the retention), a history before the stream, deletions, edits,
    # rewrites, expiries and backfills, with the mapping the design asks for: retried until the records expire (under
    # the histories' own mappings, test_exactly_once.py plays it as every ledger design)
    examples = max(1, HISTORIES // (10 * len(MODES)))
    required = (set(HAZARDS) - HAZARDS_IT_NEVER_MEETS - NOT_REQUIRED - GIVEN_UP) | set(LEDGER_KINDS)
    seen: Counter[str] = Counter()
    # when each is played against the one-reader design, then recovered (more chunks, up to four, until every hazard
    # and kind has occurred)
    for more in range(5):
        if seen and not required - set(seen):
            break
        seen += _explore(mode, examples, chunk=7052 + 100 * MODES.index(mode) + 1000 * more, mapping_as_asked=True)
    # then every board equals the recount of the items' last images, and ranks as it does; and every hazard a design
    # that reads no shard meets under that mapping occurred
    assert required - set(seen) == set()


def test_the_mapping_the_design_asks_for_retries_until_the_records_expire() -> None:
    # given any ledger history's configuration
    history = History(Config(maximum_retry_attempts=2, maximum_record_age=60, ledger=True, retractions=True), ())
    # when it is set to the mapping the one-reader design asks for
    asked = with_its_mapping(history).config
    # then retries and record age are -1 (None in the model: until the records expire), the rest unchanged
    assert (asked.maximum_retry_attempts, asked.maximum_record_age) == (None, None)
    assert replace(asked, maximum_retry_attempts=2, maximum_record_age=60) == history.config
