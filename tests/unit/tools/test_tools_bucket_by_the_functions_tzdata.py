"""The operator tools (reconcile, backfill) must bucket by the same IANA rules as the deployed functions: a recount
that files a download under another local day than the aggregator did "repairs" correct counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPOSITORY = Path(__file__).resolve().parents[3]


def zips_pin() -> str:
    (pin,) = set(re.findall(r"tzdata==([0-9.]+)", (REPOSITORY / "lambda_src/aggregator/requirements.txt").read_text()))
    return pin


def tools_requirement() -> Requirement:
    text = (REPOSITORY / "pyproject.toml").read_text()
    (spec,) = re.findall(r'"(tzdata[^"]*)"', text)
    return Requirement(spec)


@pytest.mark.xfail(
    strict=True,
    reason="the tools admit any tzdata 2026.x from the zips' pin (pyproject: tzdata>=2026.6,<2027) and nothing "
    "compares the deployed functions' release with the operator's: a later release of the same year that changes the "
    "deployment zone's rules (as 2022f did for Mexico and Fiji) makes reconcile and backfill bucket differently from "
    "the aggregator",
)
def test_the_tools_admit_only_the_tzdata_release_the_functions_carry() -> None:
    pinned = zips_pin()
    major, minor = pinned.split(".")
    later_same_year = f"{major}.{int(minor) + 1}"
    # given the release both zips carry, and a later release of the same year
    requirement = tools_requirement()
    # then the tools install exactly the zips' release, not the later one
    assert requirement.specifier.contains(pinned)
    assert not requirement.specifier.contains(later_same_year)
