"""Request parsing: what every request shares (a JSON object, known fields, the board it names) and InvalidRequest."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from boards import Board, Boards
from leaderboard_core.buckets import MAX_SORT_KEY_BYTES, board_id
from leaderboard_core.periods import ALL_TIME, PERIOD_NAMES

MAX_ENTITY_ID_BYTES = 2048
"""DynamoDB's limit for a partition key value (Developer Guide, Constraints): every id it stores can be asked for."""
BOARD_FIELDS = ("month", "period", "key", "category")


class InvalidRequest(Exception):
    """What is wrong with a request, in words its caller can act on."""


def parse_board(event: dict[str, Any], boards: Boards, now: Callable[[], datetime]) -> Board:
    """The board a request names: {"month": ...}, or {"period": ..., "key": ...} (key default: the current bucket)."""
    calendar = boards.calendar
    known = calendar.period_names
    if "month" in event:
        if "period" in event or "key" in event:
            raise InvalidRequest("name a board by month, or by period and key, not both")
        month = event["month"]
        if not isinstance(month, str) or not calendar.is_bucket_key("month", month):
            raise InvalidRequest("month is required, formatted YYYY-MM")
        period, key, month_form = "month", month, True
    elif "period" in event:
        period = event["period"]
        if not isinstance(period, str) or period not in PERIOD_NAMES:
            raise InvalidRequest(f"period must be one of {', '.join(known)}")
        if period not in known:
            raise InvalidRequest(f"this deployment keeps no {period} leaderboards (leaderboard_season is not set)")
        month_form = False
        if period == ALL_TIME:
            if "key" in event:
                raise InvalidRequest("period all has no key")
            key = ALL_TIME
        elif "key" in event:
            key = event["key"]
            if not isinstance(key, str) or not calendar.is_bucket_key(period, key):
                raise InvalidRequest(
                    f"key of a {period} is formatted {calendar.periods[period].key_format} ({calendar.zone_name})"
                )
        else:
            current = calendar.bucket_key(now(), period)
            if current is None:
                raise InvalidRequest(f"no {period} has begun yet: name one by its key")
            key = current
    else:
        raise InvalidRequest(f"month is required, formatted YYYY-MM; or period ({', '.join(known)})")
    if period not in boards.periods:
        raise InvalidRequest(
            f"this deployment keeps no {period} leaderboards (leaderboard_periods: {', '.join(boards.periods)})"
        )
    category = None
    if "category" in event:
        if not boards.categories:
            raise InvalidRequest("this deployment keeps no category leaderboards (category_attribute_name is not set)")
        category = event["category"]
        if not isinstance(category, str) or not category or utf8_bytes(category) is None:
            raise InvalidRequest("category must be a non-empty string of valid Unicode")
        if len(board_id(key, category).encode()) > MAX_SORT_KEY_BYTES:
            raise InvalidRequest(
                f"category is too long: its board id would pass DynamoDB's {MAX_SORT_KEY_BYTES} bytes for a sort key"
            )
    return Board(period, key, category, month_form, calendar)


def utf8_bytes(text: str) -> bytes | None:
    """The text's UTF-8 bytes; None for text DynamoDB cannot hold (a lone surrogate, which JSON's \\u escapes allow)."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return None


def shown(text: str) -> str:
    """A caller's string as an error message may quote it: escaped, and short."""
    return ascii(text[:40]) + ("..." if len(text) > 40 else "")
