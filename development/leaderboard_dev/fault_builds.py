"""Aggregator builds for fault experiments (tests, benchmarks): the shipped code wrapped, never changed.

The module and its zips carry no test switch. To prove that retries after partial work count
nothing twice, the tests and the benchmark deploy a *faulty build* instead: the shipped
aggregator zip with its handler module renamed and a wrapper in its place, which on a share of
the invocations with records first lets the shipped handler process half of the records (its
writes land), then fails, so that the mapping retries the whole batch with the previous state; optionally
it also fails a share of a window's final invocations before any work, so that a window can be
given up. The shares are written into the build; nothing at run time can switch them on elsewhere.

The guide's handler is built the same way, as the baseline the benchmark and the side-by-side
test compare with.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

import build

SHIPPED_MODULE = "shipped_aggregator"
BASELINES = Path(__file__).resolve().parent / "baselines"
WRAPPER = '''"""FAULT-INJECTION BUILD, for tests and benchmarks only: the shipped aggregator, failing {rate:.0%} of its
invocations with records after processing {share:.0%} of their records, and {final_rate:.0%} of a window's final
invocations before any work."""

import json
import random

import {shipped} as shipped

FAULT_RATE = {rate!r}
PROCESSED_SHARE = {share!r}
FINAL_FAULT_RATE = {final_rate!r}


class InjectedFault(Exception):
    """The function fails after part of its work, as a crash or a timeout would."""


def lambda_handler(event, context):
    records = event.get("Records") if isinstance(event, dict) else None
    if isinstance(event, dict) and event.get("isFinalInvokeForWindow") and random.random() < FINAL_FAULT_RATE:
        print(
            json.dumps(
                {{
                    "message": "test-only fault injected",
                    "function_request_id": getattr(context, "aws_request_id", None),
                    "records_received": len(records or []),
                    "final_invocation": True,
                }}
            )
        )
        raise InjectedFault("fault injected before a final invocation")
    if records and random.random() < FAULT_RATE:
        processed = records[: max(1, round(len(records) * PROCESSED_SHARE)) if PROCESSED_SHARE > 0 else 0]
        if processed:
            shipped.lambda_handler({{**event, "Records": processed}}, context)
        print(
            json.dumps(
                {{
                    "message": "test-only fault injected",
                    "function_request_id": getattr(context, "aws_request_id", None),
                    "records_received": len(records),
                }}
            )
        )
        raise InjectedFault(f"fault injected after {{len(processed)}} of {{len(records)}} records")
    return shipped.lambda_handler(event, context)
'''


def faulty_aggregator(
    shipped_zip: Path, rate: float, output: Path, processed_share: float = 0.5, final_rate: float = 0.0
) -> Path:
    """The shipped zip, `aggregator.py` renamed to `shipped_aggregator.py` and a wrapper in its place.

    `processed_share` of a failing invocation's records go through the shipped handler first
    (rounded; at least one when the share is above zero): 0 fails before any work. `final_rate` of
    the window's final invocations fail before any work.
    """
    with tempfile.TemporaryDirectory(prefix="faulty-aggregator-") as scratch:
        stage = Path(scratch)
        with zipfile.ZipFile(shipped_zip) as archive:
            archive.extractall(stage)
        (stage / "aggregator.py").rename(stage / f"{SHIPPED_MODULE}.py")
        wrapper = WRAPPER.format(rate=rate, share=processed_share, final_rate=final_rate, shipped=SHIPPED_MODULE)
        (stage / "aggregator.py").write_text(wrapper)
        build.write_zip(stage, output)
    return output


def guide_aggregator(rate: float, output: Path) -> Path:
    """The guide's per-record handler, with the same kind of fault: fail after half of the records."""
    with tempfile.TemporaryDirectory(prefix="guide-aggregator-") as scratch:
        stage = Path(scratch)
        source = (BASELINES / "guide_aggregator.py").read_text()
        (stage / "aggregator.py").write_text(source.replace("FAULT_RATE = 0.0", f"FAULT_RATE = {rate!r}"))
        build.write_zip(stage, output)
    return output


def copy_shipped(output: Path) -> Path:
    shutil.copyfile(build.ROOT / "dist" / "aggregator.zip", output)
    return output
