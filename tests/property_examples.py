"""How many examples a property test draws: its own count in CI and `make test`, a quarter of it in `make check`.

`make check` is the loop people run between edits: every property still runs there, on fewer random histories.
PROPERTY_EXAMPLES=quick asks for that; anything else (the default) is the full count."""

from __future__ import annotations

import os

QUICK_SHARE = 4
"""make check draws one example in QUICK_SHARE of a property's own count."""
QUICK_FLOOR = 3


def examples(full: int) -> int:
    """The property's example count for this run: `full`, or its quick share (never fewer than QUICK_FLOOR)."""
    if os.environ.get("PROPERTY_EXAMPLES") == "quick":
        return min(full, max(QUICK_FLOOR, full // QUICK_SHARE))
    return full
