"""A platform repository's stack: the module by `git::file://` URL, the zips from a release in S3.

What it takes (nothing of this repository's build runs in the consumer):
- a release: `leaderboard_dev.release.build_release` (what `make release` runs) into a temporary
  folder, then its zips uploaded to a bucket of the emulator's S3, as a platform team uploads them
  to its artifact bucket;
- a ref: `git::file://` checks out committed content, not the working tree. So the test clones
  this repository into a temporary directory, copies the working tree over the clone (tracked files
  and untracked ones that are not ignored, deletions included), commits that as one commit on top
  of HEAD and tags it; the module is sourced from that clone at that tag. The ref therefore holds
  exactly what is being tested, committed or not, and this repository's refs are left alone;
- the README's "Using the module from another stack" block, taken from the README itself, with
  only its source, bucket, keys, version and name replaced, in a root configuration in another
  temporary directory whose provider block points at the emulator.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from leaderboard_dev.aws import Clients
from leaderboard_dev.leaderboard import wait_until_totals
from leaderboard_dev.loadgen import Download, write_items
from leaderboard_dev.release import build_release, package_version, read_manifest
from leaderboard_dev.settings import EMULATOR_STACK, REPOSITORY, Endpoint
from leaderboard_dev.terraform_stack import Stack, deployed
from tests.acceptance.conftest import second_plan

README = REPOSITORY / "README.md"
VERSION = "0.0.0-consumer"
TAG = "consumer-test"
README_VERSION = package_version()
"""The release the README's block names: the one pyproject.toml gives (tests/unit/development/test_release.py)."""
README_BUCKET = "platform-lambda-artifacts"
README_SOURCE = re.compile(r'source = "git::https://[^"]+//terraform\?ref=v[^"]+"')

CONSUMER_VARIABLES = """
variable "name" {
  type = string
}

variable "aws_endpoint_url" {
  type = string
}

variable "region" {
  type = string
}
"""


def readme_snippet() -> str:
    section = README.read_text().split("## Using the module from another stack", 1)[1]
    return section.split("```hcl\n", 1)[1].split("```", 1)[0]


def git(directory: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=consumer-test", "-c", "user.email=consumer-test@example.com", *arguments],
        cwd=directory,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def commit_of_working_tree(clone: Path) -> str:
    """Clone this repository, make the clone's tree this working tree, commit and tag it: the ref to source."""
    git(REPOSITORY.parent, "clone", "--quiet", "--no-checkout", str(REPOSITORY), str(clone))
    git(clone, "checkout", "--quiet", "-B", "consumer-test", git(REPOSITORY, "rev-parse", "HEAD").strip())
    files = git(REPOSITORY, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0")
    git(clone, "rm", "-r", "--quiet", "--cached", ".")
    for path in filter(None, files):
        source = REPOSITORY / path
        if source.is_file():
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / path)
            git(clone, "add", "--force", "--", path)
    git(clone, "commit", "--quiet", "--allow-empty", "-m", "the working tree under test")
    git(clone, "tag", TAG)
    return git(clone, "rev-parse", TAG).strip()


def consumer_configuration(directory: Path, clone: Path, bucket: str, manifest: Path, alarms: bool) -> str:
    """The README's block with this test's source, bucket, version and name; returns the source.

    alarms=False turns the block's alarms off: MiniStack does not keep their attributes, so a
    second plan would never be empty there (tests/acceptance/test_alarms.py shows it)."""
    snippet = readme_snippet()
    assert README_SOURCE.search(snippet), "the README's block must source the module by git URL at a ref"
    for setting in (
        "package_s3_bucket",
        "aggregator_package_s3_key",
        "aggregator_package_source_code_hash",
        "query_package_s3_key",
        "query_package_source_code_hash",
    ):
        assert re.search(rf"^\s*{setting}\s*=", snippet, flags=re.MULTILINE), f"the README's block lacks {setting}"
    source = f"git::file://{clone}//terraform?ref={TAG}"
    text = README_SOURCE.sub(f'source = "{source}"', snippet, count=1)
    text = text.replace(README_BUCKET, bucket).replace(README_VERSION, VERSION)
    text = re.sub(r'^(\s*name\s*=\s*)"[^"]*"', r"\1var.name", text, count=1, flags=re.MULTILINE)
    if not alarms:
        text = re.sub(r"^(\s*create_alarms\s*=\s*)true", r"\1false", text, count=1, flags=re.MULTILINE)
    releases = directory / "releases" / "dynamodb-materialized-aggregation" / VERSION
    releases.mkdir(parents=True)
    shutil.copy2(manifest, releases / "manifest.json")
    (directory / "main.tf").write_text(text)
    (directory / "variables.tf").write_text(CONSUMER_VARIABLES)
    # The emulator wiring: the provider block of the suite's own root configuration.
    (directory / "versions.tf").write_text((EMULATOR_STACK / "versions.tf").read_text())
    emulator_main = (EMULATOR_STACK / "main.tf").read_text()
    provider = emulator_main[emulator_main.index("locals {") : emulator_main.index('module "leaderboard"')]
    (directory / "provider.tf").write_text(provider)
    return source


def test_a_consumer_stack_deploys_a_release_from_s3_with_the_module_by_git_url(
    endpoint: Endpoint, aws: Clients, emulator_kind: str, tmp_path: Path
) -> None:
    # given a release built here, its zips uploaded to the emulator's S3
    release = build_release(VERSION, tmp_path / "release" / VERSION, allow_dirty=True)
    manifest = read_manifest(release)
    bucket = f"artifacts-{uuid.uuid4().hex[:8]}"
    aws.s3.create_bucket(Bucket=bucket)
    for name in ("aggregator.zip", "query.zip"):
        aws.s3.upload_file(str(release / name), bucket, f"dynamodb-materialized-aggregation/{VERSION}/{name}")
    # and the module at a ref holding the working tree, in a clone
    clone = tmp_path / "clone"
    commit = commit_of_working_tree(clone)
    assert git(clone, "diff", "--stat", TAG).strip() == ""
    # and the README's block in a root configuration of its own
    consumer = tmp_path / "consumer"
    consumer.mkdir()
    source = consumer_configuration(
        consumer, clone, bucket, release / "manifest.json", alarms=emulator_kind != "ministack"
    )
    assert f"?ref={TAG}" in source
    assert not (consumer / "dist").exists()

    # when the consumer stack is applied
    deployment = Stack(f"consumer-{uuid.uuid4().hex[:6]}", endpoint, working_dir=consumer)
    try:
        with deployed(deployment):
            # then Terraform fetched the module at that commit
            modules = (consumer / ".terraform" / "modules" / "song_leaderboard").resolve()
            assert git(modules, "rev-parse", "HEAD").strip() == commit
            # and both functions run the released zips (Lambda's CodeSha256 is the base64 sha256)
            for function, name in (("aggregator", "aggregator.zip"), ("query", "query.zip")):
                configuration = aws.lambda_.get_function_configuration(FunctionName=f"{deployment.name}-{function}")
                assert configuration["CodeSha256"] == manifest["files"][name]["sha256_base64"], function
            # and the pipeline counts downloads
            table = f"{deployment.name}-downloads"
            downloads = [Download("song1", f"download-{n}", "user1", f"2018-01-0{n + 1}T10:00:00Z") for n in range(3)]
            write_items(aws.dynamodb, table, [download.as_item() for download in downloads])
            wait_until_totals(aws.dynamodb, table, "MonthDownloadsIndex", {"2018-01": 3}, timeout=240)
            # and a second plan changes nothing (on LocalStack once the alarms' tags are set: see second_plan)
            changes = second_plan(deployment, emulator_kind)
            assert changes is None, changes
    finally:
        for listed in aws.s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            aws.s3.delete_object(Bucket=bucket, Key=listed["Key"])
        aws.s3.delete_bucket(Bucket=bucket)


def test_the_readme_block_is_what_the_consumer_test_applies() -> None:
    """Fails fast (no emulator work) when the README's block loses the shape the test relies on."""
    snippet = readme_snippet()
    assert README_SOURCE.search(snippet)
    assert README_BUCKET in snippet
    assert README_VERSION in snippet
    assert 'files["aggregator.zip"].sha256_base64' in snippet
    assert 'files["query.zip"].sha256_base64' in snippet
    assert "package_path" not in snippet.split("module", 1)[1].split("output", 1)[0], "the block deploys from S3"


pytestmark = pytest.mark.acceptance
