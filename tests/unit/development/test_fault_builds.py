"""Fault experiments use a wrapped build of the shipped aggregator; the shipped zip itself has no test switch."""

from __future__ import annotations

import importlib.util
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import build
import pytest

from leaderboard_dev.fault_builds import SHIPPED_MODULE, faulty_aggregator, guide_aggregator
from tests.streams import download_record, window_event
from tests.unit.conftest import FakeLambdaContext


def shipped_sources(shipped: Path) -> dict[str, str]:
    with zipfile.ZipFile(shipped) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist() if "/" not in name}


def test_the_shipped_aggregator_has_no_fault_injection(built_zips: dict[str, Path]) -> None:
    sources = shipped_sources(built_zips["aggregator"])
    own = {module.name for module in (build.SOURCES / "aggregator").glob("*.py")}
    assert own <= set(sources)
    for name in own:
        assert not re.search(r"fault.?inject|injected.?fault|(?<![a-z])TEST_", sources[name], flags=re.IGNORECASE), name


def load_wrapper(
    shipped_zip: Path,
    tmp_path: Path,
    rate: float,
    monkeypatch: pytest.MonkeyPatch,
    share: float = 0.5,
    final_rate: float = 0.0,
) -> Any:
    """The faulty build unpacked, its wrapper imported with the shipped handler replaced by a recorder."""
    target = tmp_path / "task"
    build_path = faulty_aggregator(
        shipped_zip, rate, tmp_path / "faulty.zip", processed_share=share, final_rate=final_rate
    )
    with zipfile.ZipFile(build_path) as archive:
        archive.extractall(target)
    assert (target / f"{SHIPPED_MODULE}.py").read_text() == shipped_sources(shipped_zip)["aggregator.py"]
    calls: list[dict[str, Any]] = []
    shipped = type(sys)("shipped_aggregator")
    shipped.lambda_handler = lambda event, context: calls.append(event) or {"state": {}, "batchItemFailures": []}
    monkeypatch.setitem(sys.modules, SHIPPED_MODULE, shipped)
    spec = importlib.util.spec_from_file_location("faulty_wrapper", target / "aggregator.py")
    assert spec is not None
    assert spec.loader is not None
    wrapper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wrapper)
    wrapper.calls = calls
    return wrapper


def test_a_faulty_build_processes_half_of_the_records_then_fails(
    built_zips: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a build that fails every invocation with records
    wrapper = load_wrapper(built_zips["aggregator"], tmp_path, 1.0, monkeypatch)
    event = window_event([download_record(n, "song1") for n in range(1, 7)], state={"v": 1})
    # when it is invoked, then the shipped handler sees the first half of the records in the same window; it fails
    with pytest.raises(wrapper.InjectedFault):
        wrapper.lambda_handler(event, FakeLambdaContext())
    [half] = wrapper.calls
    assert [r["dynamodb"]["SequenceNumber"][-1] for r in half["Records"]] == ["1", "2", "3"]
    assert (half["shardId"], half["state"]) == (event["shardId"], event["state"])
    # and an invocation without records (a window's final one) is never failed
    assert wrapper.lambda_handler(window_event([], final=True), FakeLambdaContext()) == {
        "state": {},
        "batchItemFailures": [],
    }


def test_a_build_without_faults_passes_every_invocation_through(
    built_zips: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrapper = load_wrapper(built_zips["aggregator"], tmp_path, 0.0, monkeypatch)
    event = window_event([download_record(1, "song1")])
    wrapper.lambda_handler(event, FakeLambdaContext())
    assert wrapper.calls == [event]


def test_the_guide_baseline_gets_its_fault_rate_written_in(tmp_path: Path) -> None:
    with zipfile.ZipFile(guide_aggregator(0.25, tmp_path / "guide.zip")) as archive:
        source = archive.read("aggregator.py").decode()
    assert "FAULT_RATE = 0.25" in source


def test_a_build_with_no_processed_share_fails_before_any_work(
    built_zips: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrapper = load_wrapper(built_zips["aggregator"], tmp_path, 1.0, monkeypatch, share=0)
    with pytest.raises(wrapper.InjectedFault):
        wrapper.lambda_handler(window_event([download_record(1, "song1")]), FakeLambdaContext())
    assert wrapper.calls == []


def test_a_build_failing_final_invocations_fails_them_before_any_work_and_nothing_else(
    built_zips: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a build whose window-final invocations all fail, and whose other invocations never do
    wrapper = load_wrapper(built_zips["aggregator"], tmp_path, 0.0, monkeypatch, final_rate=1.0)
    batch = window_event([download_record(1, "song1")])
    # when a batch and then the window's final invocation arrive
    wrapper.lambda_handler(batch, FakeLambdaContext())
    with pytest.raises(wrapper.InjectedFault):
        wrapper.lambda_handler(window_event([], final=True), FakeLambdaContext())
    # then the batch reached the shipped handler and the final invocation did not
    assert wrapper.calls == [batch]
