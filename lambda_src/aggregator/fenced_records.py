"""Records a repair's recount already counted: those of an aggregate created at or before its fence (RecountedThrough).

While the repair's band is open (RecountBand, before its deadline) a write holds them in the aggregate's RecountHeld
set for the repair's close to settle (leaderboard_core.band_holds); otherwise, or past what the band can hold, each is
refused with the reason, for `recover` to recount. A band past its deadline that still holds downloads was left by a
stopped repair: every write of the aggregate reports it until a recount replaces it. aggregate_store.py decides which
records are fenced; this module what becomes of them.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from aggregate_writes import Contribution
from delivery import ShardRef
from leaderboard_core.band_holds import parse_held, shard_tag
from leaderboard_core.bookkeeping import RECOUNT_BAND, RECOUNT_HELD

Refused = list[tuple[Contribution, str]]
"""Records that must not be counted here, each with the reason its report gives."""


def band_deadline(value: Any) -> int | None:
    """The deadline of a repair's band ("<token>|<deadline>"), None when there is none or it is not one."""
    text = value.get("S") if isinstance(value, dict) else None
    parts = text.split("|") if isinstance(text, str) else []
    return int(parts[1]) if len(parts) == 2 and parts[0] and parts[1].isdigit() else None


def band_open(item: dict[str, Any], now: float) -> bool:
    """A repair's band is open on the aggregate: its close settles every download it holds, so a count below 0
    meanwhile (a retraction after the fence of a download held before it) is the band's to settle."""
    deadline = band_deadline(item.get(RECOUNT_BAND))
    return deadline is not None and deadline >= now


def held_entries(item: dict[str, Any]) -> list[str]:
    return (item.get(RECOUNT_HELD) or {}).get("SS") or []


def refuse_again(
    item: dict[str, Any],
    fence: Decimal,
    shard: ShardRef,
    passed: list[Contribution],
    now: float,
    retractions: bool,
) -> Contribution | None:
    """A record at or below the watermark, created by the fence of an open band that holds no entry of it, was
    refused when first met (a full band, no sort key), and the write of a later record passed it: the lowest such
    record, to refuse again, so that a report the first reader could not send (the deadline, the queue) is made
    by this one (`recover` recounts by aggregate: one report is enough). A duplicate costs a recount; a lost one,
    a count nobody repairs."""
    band = band_deadline(item.get(RECOUNT_BAND))
    if band is None or band < now or not passed:
        return None
    entries = [record for record in map(parse_held, held_entries(item)) if record]
    tag = shard_tag(shard.stream_arn, shard.shard_id)

    def held(contribution: Contribution) -> bool:
        if not retractions:
            return any(entry.download_id == contribution.download_id for entry in entries)
        return any(
            entry.download_id == contribution.download_id
            and entry.shard_tag == tag
            and entry.sequence >= int(contribution.sequence)
            for entry in entries
        )

    unheld = [c for c in passed if (c.created is None or c.created <= fence) and not held(c)]
    return min(unheld, key=lambda contribution: contribution.sequence) if unheld else None


def hold(
    item: dict[str, Any],
    fenced: list[Contribution],
    counted: str,
    now: float,
    retractions: bool,
    limit: int,
    refused: Refused,
) -> list[Contribution]:
    """What an open band can hold of the fenced records; the rest is refused (`counted` and why), into `refused`."""
    band = band_deadline(item.get(RECOUNT_BAND))
    if band is None:
        refused.extend((contribution, counted) for contribution in fenced)
        return []
    if band < now:
        reason = f"{counted}, and its repair's band expired at {band} without closing: recount"
        refused.extend((contribution, reason) for contribution in fenced)
        return []
    already = set(held_entries(item))
    if retractions:
        return _hold_records(len(already), fenced, counted, limit, refused)
    held: list[Contribution] = []
    for contribution in fenced:
        if contribution.download_id is None:
            refused.append((contribution, f"{counted}, and it has no sort key to hold it by"))
        elif len(already) >= limit and contribution.download_id not in already:
            refused.append((contribution, f"{counted}, and its repair's band holds {limit} already"))
        else:
            already.add(contribution.download_id)
            held.append(contribution)
    return held


def _hold_records(
    entries: int, fenced: list[Contribution], counted: str, limit: int, refused: Refused
) -> list[Contribution]:
    """With retractions: a write adds one entry per download it holds (its last record's), so a download is held
    whole or refused whole, and a full band refuses every download it holds no entry of from this write."""
    taken: set[str] = set()
    held: list[Contribution] = []
    for contribution in fenced:
        download = contribution.download_id
        if download is None:
            refused.append((contribution, f"{counted}, and it has no sort key to hold it by"))
        elif download not in taken and entries + len(taken) >= limit:
            full = f"{counted}, and its repair's band holds {limit} records already"
            refused.append((contribution, full))
        else:
            taken.add(download)
            held.append(contribution)
    return held


def report_orphaned_band(item: dict[str, Any], record: Contribution, now: float, refused: Refused) -> None:
    """A band past its deadline still holding downloads: its repair was stopped before its close, and nobody
    will count them. Every record of the aggregate that reaches a write or a retry reports it (a refused record
    naming the aggregate, for `recover`) until a recount replaces the band: a report whose send failed holds the
    checkpoint before `record`, whose retry reports it again."""
    deadline = band_deadline(item.get(RECOUNT_BAND))
    held = held_entries(item)
    if deadline is None or deadline >= now or not held:
        return
    reason = (
        f"counted; but its aggregate holds {len(held)} downloads of a repair whose band expired at {deadline} "
        "without closing (the repair was stopped): nobody counts them, recount"
    )
    expired = f"band expired at {deadline}"
    if not any(expired in earlier for _, earlier in refused):
        refused.append((record, reason))
