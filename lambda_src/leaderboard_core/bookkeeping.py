"""How the aggregator identifies what it counts: stream sequence numbers, and a download within its song."""

from __future__ import annotations

import base64
import hashlib

SEQUENCE_WIDTH = 40
"""DynamoDB stream sequence numbers have at most 40 digits; padding them makes string order numeric order."""


def pad_sequence(raw: str) -> str:
    return raw.zfill(SEQUENCE_WIDTH)


def download_id(sort_key: str) -> str:
    """A download's identity within its song: 16 bytes of SHA-256 of its sort key, base64url without padding.

    A repair's band holds the downloads it was not sure of under this id, and the repair compares
    them with those it recounted: fixed size, whatever the key's length (up to 1,024 bytes).
    """
    digest = hashlib.sha256(sort_key.encode()).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")
