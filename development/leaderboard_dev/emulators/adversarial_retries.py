"""Adversarial retries: what Lambda's stream delivery may do after a failure, beyond re-sending the batch.

The Lambda Developer Guide (services-ddb-windows): "Lambda will process each record at least once,
but doesn't guarantee that each record will be processed only once. In rare cases, such as error
handling, some records might be processed more than once. Records are always processed in order
the first time. If records are processed more than once, they might be processed out of order."
So after a failed invocation the records from the last checkpoint on may come again reordered,
split into smaller batches or merged with newer records into a larger one (never more than
BatchSize: "The maximum number of records in each batch that Lambda pulls from your stream",
CreateEventSourceMapping); the state handed to a retry is documented only as the previous
state, so a fresh one is left open; and a window may end early ("isWindowTerminatedEarly: Set to
true if window is terminated prematurely. Subsequent invoke will continue the same window with a
fresh state", the event libraries' TimeWindowProperties). First deliveries stay in order but may
be shorter than the records at hand (a batching window or a short GetRecords page cuts them).

``stream_mapping.ShardDelivery`` plays these when its ``adversary`` returns a policy; off by
default. On a deployed stack a test switches them on per function with a file
(``<directory>/<function name>.json``) in the directory the emulator's environment names
(``ADVERSARIAL_RETRIES_VARIABLE``, set by both emulators' launchers); the engine appends what it
played to ``<directory>/<function name>.journal.jsonl``. Standard library only: LocalStack imports it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

LOG = logging.getLogger(__name__)

ADVERSARIAL_RETRIES_VARIABLE = "LEADERBOARD_TOOLS_ADVERSARIAL_RETRIES"
"""The directory holding the switch files, in the emulator's environment."""
DIRECTORY_NAME = "adversarial-retries"
"""Under each emulator's state directory (``.emulator/<emulator>/``)."""

T = TypeVar("T")


class InvalidPolicy(ValueError):
    """A switch file that does not describe a policy."""


@dataclass(frozen=True)
class AdversarialRetries:
    """Probabilities of each documented liberty, drawn from a generator seeded with ``seed``."""

    seed: int = 0
    reorder: float = 0.0
    """A retry presents the records from the checkpoint on in another order."""
    split: float = 0.0
    """A retry is split into 2 to 4 smaller invocations."""
    merge: float = 0.0
    """A retry takes on newer records of the same window, up to BatchSize."""
    fresh_state: float = 0.0
    """An invocation after a failure receives an empty state instead of the last successful one."""
    terminate_early: float = 0.0
    """After a failure, the window ends early; the same window continues with a fresh state."""
    short_batches: float = 0.0
    """A first delivery carries fewer records than are at hand (still in order)."""

    @classmethod
    def from_json(cls, document: Any) -> AdversarialRetries:
        """A policy from its JSON object: known keys only, probabilities within [0, 1], an integer seed."""
        if not isinstance(document, dict):
            raise InvalidPolicy(f"expected a JSON object, got {type(document).__name__}")
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(document) - known)
        if unknown:
            raise InvalidPolicy(f"unknown keys {unknown}; known: {sorted(known)}")
        seed = document.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise InvalidPolicy(f"seed must be an integer, got {seed!r}")
        probabilities = {key: value for key, value in document.items() if key != "seed"}
        for key, value in probabilities.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise InvalidPolicy(f"{key} must be a probability between 0 and 1, got {value!r}")
        return cls(seed=seed, **{key: float(value) for key, value in probabilities.items()})

    def as_json(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class RetryPlan(Generic[T]):
    """The invocations of one retry, in the order they are made, and what was chosen."""

    invocations: list[list[T]]
    merged: int
    """How many of the newer records were taken on (they follow the pending ones in the stream)."""
    reordered: bool


class Adversary:
    """One shard's draws under a policy: reproducible for a given seed, shard and sequence of outcomes."""

    def __init__(self, policy: AdversarialRetries, shard_id: str) -> None:
        self.policy = policy
        self._rng = random.Random(f"{policy.seed}|{shard_id}")

    def chance(self, probability: float) -> bool:
        return probability > 0 and self._rng.random() < probability

    def first_delivery_size(self, available: int) -> int:
        """How many of the records at hand the first delivery takes (at least one)."""
        if available > 1 and self.chance(self.policy.short_batches):
            return self._rng.randint(1, available - 1)
        return available

    def plan_retry(self, pending: Sequence[T], newer: Sequence[T], delivered: int) -> RetryPlan[T]:
        """The retry of ``pending`` (stream order, from the checkpoint on), possibly merged with some of ``newer``.

        Only the first ``delivered`` pending records were ever delivered. The others, and those taken on from
        ``newer``, keep their order among themselves, since "Records are always processed in order the first
        time"; the delivered ones may come anywhere.
        """
        merged = self._rng.randint(1, len(newer)) if newer and self.chance(self.policy.merge) else 0
        records = [*pending, *newer[:merged]]
        order = list(range(len(records)))
        reordered = len(records) > 1 and self.chance(self.policy.reorder)
        if reordered:
            self._rng.shuffle(order)
            if order == sorted(order):
                order.reverse()
            slots = [place for place, index in enumerate(order) if index >= delivered]
            for place, index in zip(slots, sorted(order[place] for place in slots), strict=True):
                order[place] = index
            reordered = order != sorted(order)
        cuts: list[int] = []
        if len(records) > 1 and self.chance(self.policy.split):
            pieces = self._rng.randint(2, min(4, len(records)))
            cuts = sorted(self._rng.sample(range(1, len(records)), pieces - 1))
        bounds = [0, *cuts, len(records)]
        invocations = [[records[i] for i in order[start:end]] for start, end in itertools.pairwise(bounds)]
        return RetryPlan(invocations, merged, reordered)


Source = Callable[[], AdversarialRetries | None]
Journal = Callable[[dict[str, Any]], None]


def function_name(function_arn: str) -> str:
    """The function's name from its ARN (``arn:aws:lambda:region:account:function:name[:qualifier]``) or a name."""
    parts = function_arn.split(":")
    if len(parts) >= 7 and parts[5] == "function":
        return parts[6]
    return function_arn


def directory_from_environment() -> Path | None:
    value = os.environ.get(ADVERSARIAL_RETRIES_VARIABLE)
    return Path(value) if value else None


def switch_path(directory: Path, function: str) -> Path:
    return directory / f"{function}.json"


def journal_path(directory: Path, function: str) -> Path:
    return directory / f"{function}.journal.jsonl"


class SwitchFiles:
    """The policy for one function, read from its switch file whenever the engine asks (absent: off).

    A file that does not parse is reported once per content at error level and treated as absent:
    delivery goes on as AWS's ordinary retries would.
    """

    def __init__(self, directory: Path | None, function_arn: str) -> None:
        self._directory = directory
        self._function = function_name(function_arn)
        self._lock = threading.Lock()
        self._reported: str | None = None

    def policy(self) -> AdversarialRetries | None:
        if self._directory is None or not self._function:
            return None
        try:
            text = switch_path(self._directory, self._function).read_text()
        except FileNotFoundError:
            return None
        except OSError as error:
            LOG.error("adversarial retries for %s: cannot read the switch file: %s", self._function, error)
            return None
        try:
            return AdversarialRetries.from_json(json.loads(text))
        except (ValueError, InvalidPolicy) as error:
            if self._reported != text:
                self._reported = text
                LOG.error("adversarial retries for %s: switch file ignored: %s", self._function, error)
            return None

    def journal(self, entry: dict[str, Any]) -> None:
        """Append one line to the function's journal (what was played), for the tests to assert on."""
        if self._directory is None:
            return
        line = json.dumps(entry, sort_keys=True) + "\n"
        with self._lock:
            try:
                with journal_path(self._directory, self._function).open("a") as journal:
                    journal.write(line)
            except OSError as error:
                LOG.error("adversarial retries for %s: cannot write the journal: %s", self._function, error)


def switch_on(directory: Path, function: str, policy: AdversarialRetries) -> Path:
    """Write the function's switch file (atomically: the engine may read it at any moment)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = switch_path(directory, function)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(policy.as_json(), sort_keys=True))
    partial.replace(path)
    return path


def switch_off(directory: Path, function: str) -> None:
    switch_path(directory, function).unlink(missing_ok=True)


def read_journal(directory: Path, function: str) -> list[dict[str, Any]]:
    try:
        text = journal_path(directory, function).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
