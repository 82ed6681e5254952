"""Boards as requests name them: what the deployment maintains, and one leaderboard with the shape it was asked in.

Buckets, board ids and index placement are leaderboard_core's (buckets.py, index_layout.py), the
aggregator's own: docs/query-contract.md describes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leaderboard_core.buckets import ALL_TIME, board_id, periods_from_text


@dataclass(frozen=True)
class Boards:
    """What the deployment maintains: its periods, whether category boards exist, whether values are sums."""

    periods: tuple[str, ...] = ("month",)
    categories: bool = False
    summed: bool = False


def boards_from_environment(environ: Mapping[str, str]) -> Boards:
    """The module sets LEADERBOARD_PERIODS (comma-separated), CATEGORY_ATTRIBUTE and SUM_ATTRIBUTE (empty: none)."""
    periods = periods_from_text(environ.get("LEADERBOARD_PERIODS", "month"))
    return Boards(periods, bool(environ.get("CATEGORY_ATTRIBUTE")), bool(environ.get("SUM_ATTRIBUTE")))


@dataclass(frozen=True)
class Board:
    """One leaderboard, and how the request named it (the answer names it the same way)."""

    period: str
    key: str
    category: str | None = None
    month_form: bool = False
    """Asked as {"month": ...}: the answer keeps that request's shape, byte for byte."""

    @classmethod
    def month(cls, month: str, category: str | None = None) -> Board:
        return cls("month", month, category, month_form=True)

    @property
    def id(self) -> str:
        return board_id(self.key, self.category)

    def named(self) -> dict[str, Any]:
        """The answer's first fields: `month`, or `period` and `key` (none for `all`); then `category` if any."""
        fields: dict[str, Any] = {"month": self.key} if self.month_form else {"period": self.period}
        if not self.month_form and self.period != ALL_TIME:
            fields["key"] = self.key
        if self.category is not None:
            fields["category"] = self.category
        return fields

    def at(self, key: str) -> Board:
        """The same period and category at another bucket."""
        return Board(self.period, key, self.category, self.month_form)
