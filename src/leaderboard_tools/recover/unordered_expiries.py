"""What a gone report tells the operator: deleted or expired, and, where the aggregator kept an expiry of the key that
no known order placed against the version the ledger counts (`Unordered`: a pause cut the shards' lineage), that the
expiry's old image is counted already by its own item."""

from __future__ import annotations

from collections.abc import Mapping

GONE_WHY = (
    "the key counts here but its item is not in the table: deleted (to take back: name it to --deleted-keys) or "
    "expired by TTL (to keep counted: name it to --expired-keys), its record no longer in the stream; not told apart, "
    "left as it is until named"
)


def gone_why(unordered: Mapping[str, str]) -> str:
    """The gone report's `why`; `unordered`: the key's expiries kept unordered (their items' keys -> the label of the
    Version they were refused against). Such an expiry's own item counts its old image: if it ended the version
    counted here, that version's count is the expiry's already, and --deleted-keys (take back) is the answer that
    counts it once; --expired-keys would count it twice."""
    if not unordered:
        return GONE_WHY
    kept = ", ".join(f"{item} (refused against {label})" for item, label in sorted(unordered.items()))
    return (
        f"{GONE_WHY}. An expiry of this key was kept by its own item while no known order placed it against the "
        f"version counted here (a pause cut the shards' lineage): {kept}. If that expiry ended this version, its "
        "count is kept already: name the key to --deleted-keys; --expired-keys only if this version expired later, "
        "its own record no longer in the stream"
    )
