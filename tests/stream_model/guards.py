"""Guard mutations: remove one guard of a design at a time and find a history it then gets wrong.

A guard that no history needs is either unnecessary or guards a hazard the model does not
produce; either way the suite should say so. Each `Guard` names what it protects against and
how to remove it (a monkeypatch of the shipped aggregator's functions, following its code as it
is; or a switch of the reference design). Adding a guard is one entry in `SHIPPED` or comes
with a new field of `reference_design.Guards`. `breaking_history` searches for a history that
fails with the guard removed and is exact with it in place.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

import aggregate_store
import aggregate_writes
import catch_up
import lineage_sweep
import progress_item
import shard_lineage
import shard_progress
import shard_reader
import two_readers
from tests.stream_model import reference_design
from tests.stream_model.histories import History, histories, play
from tests.stream_model.regressions import GUARD_WITNESSES


class GuardNotFound(BaseException):
    """The code no longer has the guard as the harness knows it: the harness must follow the code.

    A BaseException, so that the design under test cannot catch it and the search stops loudly.
    """


@dataclass(frozen=True)
class Guard:
    name: str
    protects: str
    """What goes wrong without it."""
    remove: Callable[[pytest.MonkeyPatch], None]
    focused: bool = False
    """Searched among histories that feed one aggregate from many shards (where pruning happens)."""


@contextmanager
def removed(guard: Guard) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        guard.remove(patch)
        yield


# ---------------------------------------------------------------------------------------------- the shipped aggregator


def _replace(patch: pytest.MonkeyPatch, name: str, replacement: Any, *modules: Any) -> None:
    """Replace `name` in each of `modules`, which look it up by that name.

    GuardNotFound if one of them no longer holds it, or if another of the aggregator's modules still
    does: the guard would stay in place there.
    """
    original = getattr(modules[0], name, None)
    if original is None or any(getattr(module, name, None) is not original for module in modules):
        raise GuardNotFound(f"not every one of {[module.__name__ for module in modules]} holds {name}")
    folder = sys.modules["two_readers"].__file__.rsplit("/", 1)[0]
    defined_in = getattr(original, "__module__", None)  # a constant (a string) names no module
    holders = {
        module.__name__
        for module in list(sys.modules.values())
        if getattr(module, "__file__", None)
        and module.__file__.rsplit("/", 1)[0] == folder
        and module.__name__ != defined_in
        and getattr(module, name, None) is original
    }
    missed = holders - {module.__name__ for module in modules}
    if missed:
        raise GuardNotFound(f"{sorted(missed)} also look up {name}: replace it there too")
    for module in modules:
        patch.setattr(module, name, replacement)


WATERMARK_CLAUSES = (
    "((attribute_exists(#wm) AND #wm < :low) OR (attribute_not_exists(#wm) AND attribute_not_exists(#pruned)"
    " AND attribute_not_exists(#applied)))",
    "attribute_not_exists(#wm) AND attribute_not_exists(#pruned)",
    "#wm = :expected",
    "attribute_not_exists(#wm)",
)
"""The watermark clauses AggregateWrites.update opens its condition with (the longest first)."""
TAUTOLOGY = "(attribute_exists(#count) OR attribute_not_exists(#count))"


def _without_watermark_condition(patch: pytest.MonkeyPatch) -> None:
    """Every aggregate write adds all its records, whatever the watermark says."""
    original = aggregate_writes.AggregateWrites.update

    def update_parameters(self: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        parameters = original(self, *args, **kwargs)
        condition = parameters["ConditionExpression"]
        clause = next((clause for clause in WATERMARK_CLAUSES if condition.startswith(clause)), None)
        if clause is None:
            raise GuardNotFound(f"no known watermark clause opens {condition!r}: update guards.WATERMARK_CLAUSES")
        parameters["ConditionExpression"] = TAUTOLOGY + condition[len(clause) :]
        parameters["ExpressionAttributeNames"]["#count"] = self._schema.count
        return parameters

    def not_yet_counted(self: Any, known: Any, shard: Any, remaining: list[Any], outcome: Any) -> list[Any]:
        return list(remaining)

    patch.setattr(aggregate_writes.AggregateWrites, "update", update_parameters)
    patch.setattr(aggregate_store.AggregateStore, "_not_yet_counted", not_yet_counted)


class _StripCondition:
    """A DynamoDB client that drops the condition of the updates `matches` selects."""

    def __init__(self, client: Any, matches: Callable[[dict[str, Any]], bool]) -> None:
        self._client, self._matches = client, matches

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def update_item(self, **parameters: Any) -> Any:
        if self._matches(parameters):
            parameters = {key: value for key, value in parameters.items() if key != "ConditionExpression"}
        return self._client.update_item(**parameters)


def _checkpoint_may_go_back(patch: pytest.MonkeyPatch) -> None:
    """The checkpoint is set to whatever the last reader read, even below where it was."""
    original = shard_progress.ProgressStore.advance

    def advance(self: Any, *args: Any, **kwargs: Any) -> bool:
        client = self._client
        self._client = _StripCondition(client, lambda parameters: "#checkpoint" in parameters["UpdateExpression"])
        try:
            return original(self, *args, **kwargs)
        finally:
            self._client = client

    patch.setattr(shard_progress.ProgressStore, "advance", advance)


def _counts_delivered_records(patch: pytest.MonkeyPatch) -> None:
    """The shard is not read: what the event delivered (or claims) is counted."""
    original_process = two_readers.process_delivery
    delivered: list[list[dict[str, Any]]] = []

    def process_delivery(delivery: Any, *args: Any, **kwargs: Any) -> Any:
        delivered.append(delivery.records)
        try:
            return original_process(delivery, *args, **kwargs)
        finally:
            delivered.pop()

    def read_shard(streams: Any, shard: Any, after: str | None, bound: str | None, *args: Any, **kwargs: Any) -> Any:
        records = [
            record
            for record in (delivered[-1] if delivered else [])
            if after is None or shard_reader.pad_sequence(record["dynamodb"]["SequenceNumber"]) > after
        ]
        records.sort(key=lambda record: shard_reader.pad_sequence(record["dynamodb"]["SequenceNumber"]))
        return shard_reader.ShardRead(records=records, reached_bound=True)

    _replace(patch, "process_delivery", process_delivery, two_readers)
    _replace(patch, "read_shard", read_shard, catch_up, lineage_sweep)


def _checkpoint_passes_unwritten(patch: pytest.MonkeyPatch) -> None:
    """The checkpoint moves past an aggregate whose write failed (or a report that was not sent)."""
    original = catch_up.advance

    def advance(deps: Any, catchup: Any, *args: Any, **kwargs: Any) -> Any:
        catchup.held_back_from = None
        return original(deps, catchup, *args, **kwargs)

    _replace(patch, "advance", advance, two_readers, shard_lineage)


class _PassedProgress:
    def __init__(self, progress: Any) -> None:
        self._progress = progress

    def __getattr__(self, name: str) -> Any:
        return getattr(self._progress, name)

    def lower_bound(self, shard: Any) -> progress_item.Progress:
        return progress_item.Progress(checkpoint="9" * 40, ended=True, exists=True)


def _prunes_ahead_of_the_checkpoint(patch: pytest.MonkeyPatch) -> None:
    """Watermarks are pruned whether or not the shard's checkpoint has passed them."""
    original = aggregate_store.AggregateStore._after_write

    def after_write(self: Any, *args: Any, **kwargs: Any) -> None:
        progress = self._progress
        self._progress = _PassedProgress(progress)
        try:
            original(self, *args, **kwargs)
        finally:
            self._progress = progress

    patch.setattr(aggregate_store.AggregateStore, "_after_write", after_write)


def _no_proof_after_pruning(patch: pytest.MonkeyPatch) -> None:
    """With the watermark pruned, records are added without proving them above the checkpoint."""

    def write_with_proof(self: Any, key: Any, shard: Any, contributions: list[Any], known: Any) -> None:
        self._write(key, shard, contributions, known)

    def not_yet_counted(self: Any, known: Any, shard: Any, remaining: list[Any], outcome: Any) -> list[Any]:
        if shard.watermark_name not in known.item:
            return list(remaining)
        return original_not_yet_counted(self, known, shard, remaining, outcome)

    original_not_yet_counted = aggregate_store.AggregateStore._not_yet_counted
    patch.setattr(aggregate_store.AggregateStore, "_write_with_proof", write_with_proof)
    patch.setattr(aggregate_store.AggregateStore, "_not_yet_counted", not_yet_counted)


def _no_recount_fence(patch: pytest.MonkeyPatch) -> None:
    """Records created before a repair's RecountedThrough are counted again."""
    _replace(patch, "RECOUNTED_THROUGH", "RecountedThroughIgnored", aggregate_store, aggregate_writes)


def _finals_do_not_catch_up(patch: pytest.MonkeyPatch) -> None:
    """A final (or early-terminated) invocation answers without reading through its bound."""
    original = two_readers.process_delivery

    def process_delivery(delivery: Any, *args: Any, **kwargs: Any) -> Any:
        if not delivery.is_direct and (delivery.is_final or delivery.terminated_early):
            delivery = dataclasses.replace(delivery, is_final=False, terminated_early=False)
            _response, report = original(delivery, *args, **kwargs)
            return {"state": {}, "batchItemFailures": []}, report
        return original(delivery, *args, **kwargs)

    _replace(patch, "process_delivery", process_delivery, two_readers)


def _children_before_parents(patch: pytest.MonkeyPatch) -> None:
    """A new shard is read without first reading its ancestors to their end, or reporting those deleted unread."""
    _replace(patch, "count_ancestry", lambda *arguments: None, two_readers, lineage_sweep)


def _finals_forget_what_was_delivered(patch: pytest.MonkeyPatch) -> None:
    """A final invocation with a fresh state and no records reads only as far as a few empty pages take it."""
    patch.setattr(shard_progress.ProgressStore, "note_delivered", lambda self, shard, high: None)


def _gone_shards_fail_direct_invocations(patch: pytest.MonkeyPatch) -> None:
    """A direct invocation of a shard the stream no longer holds fails, and nothing asks for a recount."""

    def gone(deps: Any, delivery: Any, shard: Any, progress: Any, report: Any) -> Any:
        raise RuntimeError(f"{shard.shard_id} is gone")

    _replace(patch, "_gone", gone, two_readers)


def _empty_page_ends_a_read(patch: pytest.MonkeyPatch) -> None:
    """A bounded read stops at the first empty page."""
    patch.setattr(shard_reader, "MAX_EMPTY_PAGES", 1)


SHIPPED: tuple[Guard, ...] = (
    Guard(
        "watermark condition",
        "a record read twice (a retry, two readers, a late write) is counted twice",
        _without_watermark_condition,
    ),
    Guard(
        "monotonic checkpoint",
        "a slower reader moves the checkpoint back, under pruned watermarks",
        _checkpoint_may_go_back,
        focused=True,
    ),
    Guard(
        "read from the checkpoint",
        "retries out of order, direct invocations ahead, given-up windows",
        _counts_delivered_records,
    ),
    Guard(
        "checkpoint held behind an unwritten aggregate",
        "a throttled or abandoned write is never retried",
        _checkpoint_passes_unwritten,
    ),
    Guard(
        "prune only behind the checkpoint",
        "a pruned watermark lets records still unread count twice",
        _prunes_ahead_of_the_checkpoint,
        focused=True,
    ),
    Guard(
        "proof by transaction after pruning",
        "a re-read of pruned records counts them again",
        _no_proof_after_pruning,
        focused=True,
    ),
    Guard(
        "recount fence",
        "a repair's count is added to by records it already counted",
        _no_recount_fence,
    ),
    Guard(
        "final invocations catch up",
        "per_window counts nothing; a final's bound is never reached",
        _finals_do_not_catch_up,
    ),
    Guard(
        "parent read first",
        "a shard deleted unread while the mapping was paused is never reported",
        _children_before_parents,
    ),
    Guard(
        "finals read what was delivered",
        "a retried final with a fresh state and no records ends the window unread",
        _finals_forget_what_was_delivered,
    ),
    Guard(
        "a gone shard asks for a recount",
        "a given-up range of a shard deleted since is never recounted",
        _gone_shards_fail_direct_invocations,
    ),
    Guard(
        "empty pages read through",
        "a bounded read stops short in the middle of a shard",
        _empty_page_ends_a_read,
    ),
)
"""The shipped aggregator's guards, as its code (lambda_src/aggregator) implements them."""


# ---------------------------------------------------------------------------------------------- the reference design


def _reference_guard(field: dataclasses.Field[Any]) -> Guard:
    def remove(patch: pytest.MonkeyPatch) -> None:
        patch.setattr(reference_design, "DEFAULT_GUARDS", reference_design.Guards(**{field.name: False}))

    return Guard(field.name.replace("_", " "), field.metadata["protects"], remove)


REFERENCE: tuple[Guard, ...] = tuple(_reference_guard(field) for field in dataclasses.fields(reference_design.Guards))
"""The reference design's guards: the stub list the harness was written against."""


# ---------------------------------------------------------------------------------------------- the search


def breaking_history(
    guard: Guard, make_design: Any, examples: int, seed: int = 14, shrink: bool = False
) -> History | None:
    """A history exact with the guard and not without it, or None if `examples` histories found none.

    The kept witnesses (regressions.GUARD_WITNESSES) are tried first: some hazards need a precise
    interleaving that random histories reach only rarely.
    """

    def breaks(history: History) -> bool:
        with removed(guard):
            if not play(history, make_design).problems():
                return False
        return not play(history, make_design).problems()

    witness = GUARD_WITNESSES.get(guard.name)
    if witness is not None and breaks(witness):
        return witness

    phases = (Phase.generate, Phase.shrink) if shrink else (Phase.generate,)
    search = settings(
        max_examples=examples, deadline=None, database=None, phases=phases, suppress_health_check=list(HealthCheck)
    )
    try:
        return find(histories(focused=guard.focused), breaks, settings=search, random=random.Random(seed))
    except NoSuchExample:
        return None
