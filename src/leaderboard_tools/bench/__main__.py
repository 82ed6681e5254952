"""`python -m leaderboard_tools.bench index-layout`: the leaderboard-shard measurements into bench/results/."""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
from datetime import UTC, datetime

from leaderboard_tools.aws import clients
from leaderboard_tools.bench import index_layout
from leaderboard_tools.emulator import identify
from leaderboard_tools.settings import REPOSITORY, endpoint_from_environment

RESULTS = REPOSITORY / "bench" / "results"


def provenance() -> dict[str, str]:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True, check=False)
    return {
        "commit": commit.stdout.strip(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, {platform.python_version()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leaderboard_tools.bench", description=__doc__)
    parser.add_argument("part", choices=["index-layout"])
    parser.add_argument("--smoke", action="store_true", help="small sizes, for the test suite")
    arguments = parser.parse_args(argv)
    endpoint = endpoint_from_environment()
    aws = clients(endpoint)
    small = arguments.smoke
    result = {
        **provenance(),
        "emulator": identify(endpoint),
        "index_writes": index_layout.index_writes_per_partition(
            endpoint,
            aws,
            downloads=500 if small else 5000,
            songs=200 if small else 1000,
            shards_values=(1, 4),
            batch_size=100,
        ),
        "top_ten_latency": index_layout.top_ten_latency(
            endpoint,
            aws,
            shards_values=(1, 4) if small else (1, 4, 16),
            downloads=500 if small else 5000,
            songs=200 if small else 1000,
            repeats=5 if small else 30,
        ),
        "rank_cost": index_layout.rank_cost(endpoint, aws, song_counts=(100,) if small else (1000, 100_000), shards=4),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("index_layout.smoke.json" if small else "index_layout.json")
    path.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
