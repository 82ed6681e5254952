"""Per design and per hazard class: how many seeded histories went wrong, and by how many downloads.

    python -m tests.stream_model.report [histories per design] [seed]    (MODEL_DESIGNS="name;name" to choose)

(run from the repository root with the aggregator on the path, as the unit tests run: the
script puts it there). Every history of a design is the same for every design: the same seeds,
the same steps, so the columns compare designs on the same deliveries. A history counts under
every hazard class that occurred in it; `lost` is after the operator's recover, `uncovered` is
what was missing before recover with no durable failure record naming it.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]
for path in ("lambda_src/aggregator", "lambda_src/query", "."):
    sys.path.insert(0, str(REPOSITORY / path))
for name, value in {
    "TABLE_NAME": "model-downloads",
    "TABLE_ARN": "arn:aws:dynamodb:us-east-1:000000000000:table/model-downloads",
    "PROGRESS_TABLE_NAME": "model-downloads-progress",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    "POWERTOOLS_METRICS_NAMESPACE": "Model",
}.items():
    os.environ.setdefault(name, value)

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402

from tests.stream_model import naive_designs  # noqa: E402
from tests.stream_model.aws_delivery import HAZARDS  # noqa: E402
from tests.stream_model.designs import shipped  # noqa: E402
from tests.stream_model.histories import Config, History, histories, play  # noqa: E402
from tests.stream_model.reference_design import CheckpointReader  # noqa: E402


def with_mode(make: Any, mode: str) -> Any:
    def make_in_mode(env: Any, config: Config) -> Any:
        return make(env, Config(**{**config.__dict__, "aggregate_writes": mode}))

    return make_in_mode


DESIGNS = {
    "guide": naive_designs.factory(naive_designs.GuideDesign),
    "0.1": naive_designs.factory(naive_designs.PreviousDesign),
    "high mark, per_batch": with_mode(naive_designs.factory(naive_designs.HighMarkDesign), "per_batch"),
    "high mark, per_window": with_mode(naive_designs.factory(naive_designs.HighMarkDesign), "per_window"),
    "shipped, per_batch": with_mode(shipped, "per_batch"),
    "shipped, per_window": with_mode(shipped, "per_window"),
    "reference": naive_designs.factory(CheckpointReader),
}


def drawn(count: int, seed_value: int) -> list[History]:
    found: list[History] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @seed(seed_value)
    @given(histories())
    def collect(history: History) -> None:
        found.append(history)

    collect()
    return found


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    seed_value = int(sys.argv[2]) if len(sys.argv) > 2 else 2024
    started = time.monotonic()
    stories = drawn(count, seed_value)
    print(f"{len(stories)} histories drawn in {time.monotonic() - started:.0f} s\n")
    table: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    chosen = [name for name in os.environ.get("MODEL_DESIGNS", "").split(";") if name] or list(DESIGNS)
    for design, make in DESIGNS.items():
        if design not in chosen:
            continue
        started = time.monotonic()
        for history in stories:
            outcome = play(history, make)
            failed = bool(outcome.problems())
            for hazard in [*outcome.hazards, "(all)"]:
                row = table[hazard][design]
                row["histories"] += 1
                row["failing"] += failed
                row["lost"] += outcome.lost
                row["uncovered"] += outcome.uncovered
                row["over"] += max(outcome.over, outcome.over_before)
        total = table["(all)"][design]
        print(
            f"{design}: {total['failing']} of {total['histories']} histories wrong, lost {total['lost']} "
            f"({total['uncovered']} without a failure record), over-counted {total['over']}, "
            f"{time.monotonic() - started:.0f} s"
        )
    print("\n| hazard class | histories | " + " | ".join(chosen) + " |")
    print("|---|---|" + "---|" * len(chosen))
    for hazard in [*HAZARDS, "(all)"]:
        rows = table.get(hazard, {})
        seen = max((row["histories"] for row in rows.values()), default=0)
        cells = []
        for design in chosen:
            row = rows.get(design, Counter())
            cells.append(
                f"{row['failing']} wrong: lost {row['lost']} ({row['uncovered']} unrecorded), over {row['over']}"
                if row["failing"]
                else "0"
            )
        print(f"| {hazard} | {seen} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
