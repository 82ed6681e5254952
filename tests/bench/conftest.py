"""The benchmark's own tests: its arithmetic, its report and its parts on moto, no emulator. Apart from tests/unit so
that the product's unit tests import nothing of `leaderboard_dev.bench` (the benchmark needs its plotting extras)."""
