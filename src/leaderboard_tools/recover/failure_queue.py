"""Receiving the failure queue's messages and keeping them invisible to other consumers while recover works."""

from __future__ import annotations

import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leaderboard_tools.recover.failure_messages import Message

VISIBILITY_SECONDS = 120
"""Renewed every third of it while recover runs: a crashed run frees its messages within two minutes."""
LONG_POLL_SECONDS = 2
"""How long each receive may wait: a short poll queries "only a subset of the servers" and may answer a false empty
response while messages wait; a long poll eliminates those (Amazon SQS short and long polling)."""
MAX_MESSAGES = 1000
"""Per run; the rest waits for the next run (memory and the run's length stay bounded)."""


class VisibilityKeeper:
    """Renews the visibility timeout of the messages recover holds, so no other consumer sees them meanwhile.

    SQS: a received message stays invisible for the visibility timeout, which ChangeMessageVisibility
    extends (up to 12 hours from its receipt).
    """

    def __init__(self, sqs: Any, queue_url: str, visibility_seconds: int) -> None:
        self._sqs = sqs
        self._queue_url = queue_url
        self._seconds = visibility_seconds
        self._held: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="visibility-keeper", daemon=True)

    def hold(self, messages: list[Message]) -> None:
        with self._lock:
            self._held.update({message.message_id: message.receipt_handle for message in messages})

    def release(self, message: Message) -> None:
        with self._lock:
            self._held.pop(message.message_id, None)

    def __enter__(self) -> VisibilityKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(self._seconds / 3):
            with self._lock:
                held = list(self._held.values())
            for start in range(0, len(held), 10):
                entries = [
                    {"Id": str(index), "ReceiptHandle": handle, "VisibilityTimeout": self._seconds}
                    for index, handle in enumerate(held[start : start + 10])
                ]
                try:
                    self._sqs.change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
                except (ClientError, BotoCoreError):
                    continue


def receive_all(
    sqs: Any,
    queue_url: str,
    visibility_seconds: int,
    limit: int = MAX_MESSAGES,
    long_poll_seconds: int = LONG_POLL_SECONDS,
) -> list[dict[str, Any]]:
    """Messages until a long poll comes back empty (long polling queries all servers: no false empty answer)."""
    messages: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(messages) < limit:
        page = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=long_poll_seconds,
            VisibilityTimeout=visibility_seconds,
        ).get("Messages", [])
        fresh = [message for message in page if message["MessageId"] not in seen]
        if not fresh:
            return messages
        seen.update(message["MessageId"] for message in fresh)
        messages.extend(fresh)
    return messages
