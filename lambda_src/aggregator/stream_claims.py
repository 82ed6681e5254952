"""The aggregator's side of the claims (leaderboard_core.claims): while a backfill may count a table's history, every
download it reads is claimed before it is counted, and a download the backfill claimed first is left to it."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from download_records import Download
from leaderboard_core.claims import BACKFILL, STREAM, owner_of, stream_claim


@dataclass
class ClaimOutcome:
    ours: list[Download] = field(default_factory=list)
    """Claimed by the stream, now or by an earlier read of the same record: the aggregator counts these."""
    backfilled: list[Download] = field(default_factory=list)
    """Claimed by the backfill first: it counted them, the aggregator must not."""
    unclaimed: list[Download] = field(default_factory=list)
    """The claim failed (throttled, an error, an owner nobody writes): not counted now, the checkpoint stays below."""


class StreamClaims:
    def __init__(self, client: Any, table: str, executor: Executor) -> None:
        self._client = client
        self._table = table
        self._executor = executor

    def _claim(self, download: Download, late: Callable[[], bool]) -> str | None:
        if not download.item_key or late():
            return None
        try:
            return owner_of(self._client.update_item(**stream_claim(self._table, download.item_key)))
        except (ClientError, BotoCoreError):
            return None

    def sort(self, downloads: list[Download], late: Callable[[], bool] = lambda: False) -> ClaimOutcome:
        """Claim every download at once; each record is claimed once, however many boards it counts in. Once `late`
        says the invocation's time is nearly up, no claim starts: the rest stay unclaimed, for the next read."""
        outcome = ClaimOutcome()
        owners = self._executor.map(lambda download: self._claim(download, late), downloads)
        for download, owner in zip(downloads, owners, strict=True):
            if owner == STREAM:
                outcome.ours.append(download)
            elif owner == BACKFILL:
                outcome.backfilled.append(download)
            else:
                outcome.unclaimed.append(download)
        return outcome
