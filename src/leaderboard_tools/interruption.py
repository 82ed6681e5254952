"""Ctrl-C: what a run says it left, and worker threads that stop at once instead of finishing their scans.

Python raises KeyboardInterrupt in the main thread only. The recount's scan segments, the in-flight check's shard
readers and rekey's segments run in worker threads, which a pool's `with` waits for on the way out: without more, a
Ctrl-C during a scan would wait for every segment to reach its end. While a command runs, `stopping_workers()` makes
Ctrl-C also set `WORKERS_STOP`, and every operator client (operator_aws.py) refuses to send a worker thread's next
request once it is set (`WorkerStopped`). The main thread's requests still go: those are what a repair sends on its way
out to close its bands.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WORKERS_STOP = threading.Event()
"""Set by Ctrl-C while a command runs; cleared when it ends."""


class WorkerStopped(Exception):
    """A worker thread's request not sent: the run was interrupted."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what the run had done when it came (`outcome`): what state it left, what to run now."""

    def __init__(self, outcome: str) -> None:
        super().__init__(outcome)
        self.outcome = outcome


def stop_worker_requests(**_: Any) -> None:
    """botocore's `request-created` hook: no new request from a worker thread once the run is interrupted."""
    if WORKERS_STOP.is_set() and threading.current_thread() is not threading.main_thread():
        raise WorkerStopped("the run was interrupted")


@contextmanager
def stopping_workers() -> Iterator[None]:
    """While the block runs, Ctrl-C stops the worker threads' requests as well as the main thread (see the module)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, frame: Any) -> None:
        WORKERS_STOP.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler not installed from Python, which cannot be put back
            signal.signal(signal.SIGINT, previous)
        WORKERS_STOP.clear()
