"""Boards as requests name them: what the deployment maintains, and one leaderboard with the shape it was asked in.

Buckets, board ids and index placement are leaderboard_core's (buckets.py, index_layout.py), the
aggregator's own: docs/query-contract.md describes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from leaderboard_core.buckets import UTC_CALENDAR, Calendar, board_id, calendar_from_environment, instant_text
from leaderboard_core.periods import ALL_TIME


@dataclass(frozen=True)
class Boards:
    """What the deployment maintains: its periods, whether category boards exist, whether values are sums."""

    periods: tuple[str, ...] = ("month",)
    categories: bool = False
    summed: bool = False
    calendar: Calendar = UTC_CALENDAR
    """The deployment's time zone and seasons: which keys name a bucket, and when each begins and ends."""


def boards_from_environment(environ: Mapping[str, str]) -> Boards:
    """The module sets LEADERBOARD_PERIODS (comma-separated), CATEGORY_ATTRIBUTE and SUM_ATTRIBUTE (empty: none),
    LEADERBOARD_TIME_ZONE and the seasons (LEADERBOARD_SEASON_START, LEADERBOARD_SEASON_LENGTH_DAYS)."""
    calendar = calendar_from_environment(environ)
    periods = calendar.periods_from_text(environ.get("LEADERBOARD_PERIODS", "month"))
    return Boards(periods, bool(environ.get("CATEGORY_ATTRIBUTE")), bool(environ.get("SUM_ATTRIBUTE")), calendar)


@dataclass(frozen=True)
class Board:
    """One leaderboard, and how the request named it (the answer names it the same way)."""

    period: str
    key: str
    category: str | None = None
    month_form: bool = False
    """Asked as {"month": ...}: the answer keeps that request's shape, byte for byte."""
    calendar: Calendar = field(default=UTC_CALENDAR, compare=False)
    """The deployment's: when the board begins and ends."""

    @classmethod
    def month(cls, month: str, category: str | None = None) -> Board:
        return cls("month", month, category, month_form=True)

    @property
    def id(self) -> str:
        return board_id(self.key, self.category)

    def named(self) -> dict[str, Any]:
        """The answer's first fields: `month`, or `period` and `key` (none for `all`); then `category` if any; then,
        asked by period, when the board begins and ends (`boardStart`, `boardEnd`)."""
        fields: dict[str, Any] = {"month": self.key} if self.month_form else {"period": self.period}
        if not self.month_form and self.period != ALL_TIME:
            fields["key"] = self.key
        if self.category is not None:
            fields["category"] = self.category
        if not self.month_form:
            fields.update(self.span())
        return fields

    def span(self) -> dict[str, str | None]:
        """When the board begins and when the next begins (it resets), ISO 8601 with the zone's offset then; null
        for `all`, which never resets."""
        bounds = self.calendar.bounds(self.period, self.key)
        start, end = bounds if bounds is not None else (None, None)
        return {"boardStart": instant_text(start, self.calendar), "boardEnd": instant_text(end, self.calendar)}

    def at(self, key: str) -> Board:
        """The same period and category at another bucket."""
        return Board(self.period, key, self.category, self.month_form, self.calendar)
