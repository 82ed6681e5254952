"""The operator tools (reconcile, backfill) must bucket by the same IANA rules as the deployed functions: a recount
that files a download under another local day than the aggregator did "repairs" correct counts. The functions carry
the tzdata of their zips and say which in the aggregator's environment; the tools read a local-clock deployment only
with that same release installed."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

from leaderboard_core.buckets import TIME_ZONE_DATA_VARIABLE, TIME_ZONE_VARIABLE
from leaderboard_tools.deployment import DeploymentError, deployed_calendar

REPOSITORY = Path(__file__).resolve().parents[3]


def zips_pin() -> str:
    pins = {
        pin
        for function in ("aggregator", "query")
        for pin in re.findall(
            r"tzdata==([0-9.]+)", (REPOSITORY / f"lambda_src/{function}/requirements.txt").read_text()
        )
    }
    (pin,) = pins
    return pin


def test_the_release_terraform_gives_the_functions_is_the_one_their_zips_carry() -> None:
    # given the tzdata both zips pin, and what terraform/time_zones.tf gives the aggregator's environment
    (given,) = re.findall(r'time_zone_data_version = "([^"]+)"', (REPOSITORY / "terraform/time_zones.tf").read_text())
    # then they are one release
    assert given == zips_pin()
    assert re.search(
        r"LEADERBOARD_TIME_ZONE_DATA\s*=\s*local.time_zone_data_version",
        (REPOSITORY / "terraform/lambda.tf").read_text(),
    )


def test_a_local_clock_deployment_of_another_tzdata_release_is_refused_with_the_release_to_install() -> None:
    # given a New York deployment whose functions carry another tzdata release than the tools'
    deployed = f"{version('tzdata')}9"
    environment = {TIME_ZONE_VARIABLE: "America/New_York", TIME_ZONE_DATA_VARIABLE: deployed}
    # when the tools read its calendar
    with pytest.raises(DeploymentError) as refused:
        deployed_calendar(environment)
    # then they refuse, naming both releases and the one to install
    assert f"tzdata {deployed}" in str(refused.value)
    assert f"tzdata {version('tzdata')}" in str(refused.value)
    assert f"pip install 'tzdata=={deployed}'" in str(refused.value)


def test_a_deployment_on_the_tools_release_or_on_utc_is_read() -> None:
    # given a New York deployment on the tools' release, and a UTC one on any release
    same = {TIME_ZONE_VARIABLE: "America/New_York", TIME_ZONE_DATA_VARIABLE: version("tzdata")}
    utc = {TIME_ZONE_VARIABLE: "UTC", TIME_ZONE_DATA_VARIABLE: "1999.1"}
    # when the tools read their calendars, then each is read (UTC needs no zone's rules)
    assert deployed_calendar(same).zone_name == "America/New_York"
    assert deployed_calendar(utc).zone_name == "UTC"
