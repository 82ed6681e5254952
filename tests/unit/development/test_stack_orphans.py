"""A stack's apply adopts what its own lost create left out of the state, and nothing else.

Seen in CI on LocalStack: `CreateRole => 200`, then 150 ms later `CreateRole => 409 (EntityAlreadyExists)` for the
same role of a uniquely named stack. The provider lost the first response and the SDK retried a create that is not
idempotent. The stack imports such a resource by its name and applies again.
"""

from __future__ import annotations

from typing import Any

import pytest

from leaderboard_dev.terraform_stack import ORPHAN_ROUNDS, Stack, TerraformError, orphans

SEEN_IN_CI = """
Error: creating IAM Role (ttl-5ee48e-aggregator): operation error IAM: CreateRole, https response error StatusCode: \
409, RequestID: d97b98ff-2848-4402-a9d6-e771513e1bc4, EntityAlreadyExists: Role with name ttl-5ee48e-aggregator \
already exists.

  with module.leaderboard.aws_iam_role.aggregator[0],
  on ../../terraform/iam.tf line 61, in resource "aws_iam_role" "aggregator":
  61: resource "aws_iam_role" "aggregator" {

"""

ANOTHER_FAILURE = """
Error: creating Lambda Event Source Mapping (arn:aws:dynamodb:us-east-1:000000000000:table/ttl-5ee48e-downloads): \
operation error Lambda: CreateEventSourceMapping, https response error StatusCode: 400, InvalidParameterValueException

  with module.leaderboard.aws_lambda_event_source_mapping.aggregator[0],
  on ../../terraform/lambda.tf line 90, in resource "aws_lambda_event_source_mapping" "aggregator":

"""

SOMEONE_ELSES = SEEN_IN_CI.replace("ttl-5ee48e-aggregator", "ttl-5ee48eX-aggregator")


class RecordingStack(Stack):
    """A Stack whose Terraform commands answer from a script, recording each call."""

    def __init__(self, name: str, apply_errors: list[str]) -> None:
        super().__init__(name, endpoint=None)
        self.apply_errors = apply_errors
        self.calls: list[tuple[str, ...]] = []

    def init(self) -> None:
        self.calls.append(("init",))

    def _run(self, command: str, *arguments: str, check: bool = True, **options: Any) -> tuple[int, str, str]:
        self.calls.append((command, *arguments))
        if command == "apply":
            error = self.apply_errors.pop(0) if self.apply_errors else ""
            return (1 if error else 0), "", error
        if command == "output":
            return 0, '{"table_name": {"value": "t"}}', ""
        return 0, "", ""


def test_the_orphan_seen_in_ci_is_named_by_its_address_and_its_name() -> None:
    assert orphans(SEEN_IN_CI, "ttl-5ee48e") == [
        ("module.leaderboard.aws_iam_role.aggregator[0]", "ttl-5ee48e-aggregator")
    ]


SCHEDULE_SEEN_IN_CI = """
Error: creating AWS EventBridge Scheduler Schedule (ttl-ebecb5-lineage-sweep): operation error Scheduler: \
CreateSchedule, https response error StatusCode: 409, RequestID: 79b3290e-d0c2-4eb0-a91d-74dacff6a16b, \
ConflictException: Schedule ttl-ebecb5-lineage-sweep already exists in group default.

  with module.leaderboard.aws_scheduler_schedule.lineage_sweep[0],
  on ../../terraform/schedule.tf line 65, in resource "aws_scheduler_schedule" "lineage_sweep":
  65: resource "aws_scheduler_schedule" "lineage_sweep" {

"""


def test_a_schedule_the_apply_created_without_knowing_it_is_imported_by_its_group_and_name() -> None:
    assert orphans(SCHEDULE_SEEN_IN_CI, "ttl-ebecb5") == [
        ("module.leaderboard.aws_scheduler_schedule.lineage_sweep[0]", "default/ttl-ebecb5-lineage-sweep")
    ]
    assert orphans(SCHEDULE_SEEN_IN_CI, "ttl-ebecb") == []


def test_a_name_that_is_not_the_stacks_or_a_failure_that_is_no_conflict_is_no_orphan() -> None:
    assert orphans(SOMEONE_ELSES, "ttl-5ee48e") == []
    assert orphans(ANOTHER_FAILURE, "ttl-5ee48e") == []
    assert orphans(ANOTHER_FAILURE + SEEN_IN_CI, "ttl-5ee48e") == [
        ("module.leaderboard.aws_iam_role.aggregator[0]", "ttl-5ee48e-aggregator")
    ]


def test_an_apply_that_met_its_own_orphan_imports_it_and_applies_again() -> None:
    # given a stack whose first apply finds the role it created a moment before
    stack = RecordingStack("ttl-5ee48e", [SEEN_IN_CI])
    # when it is applied
    with pytest.warns(UserWarning, match="was created but not recorded"):
        outputs = stack.apply()
    # then the role is imported by its name, the apply runs again, and the outputs are read
    assert [call[0] for call in stack.calls] == ["init", "apply", "import", "apply", "output"]
    assert stack.calls[2] == ("import", "module.leaderboard.aws_iam_role.aggregator[0]", "ttl-5ee48e-aggregator")
    assert outputs == {"table_name": "t"}


def test_any_other_failure_raises_at_once_without_an_import() -> None:
    for error in (ANOTHER_FAILURE, SOMEONE_ELSES):
        stack = RecordingStack("ttl-5ee48e", [error])
        with pytest.raises(TerraformError, match="terraform apply failed"):
            stack.apply()
        assert [call[0] for call in stack.calls] == ["init", "apply"]


def test_orphans_without_end_raise_after_the_last_round() -> None:
    stack = RecordingStack("ttl-5ee48e", [SEEN_IN_CI] * (ORPHAN_ROUNDS + 1))
    with pytest.warns(UserWarning, match="importing"), pytest.raises(TerraformError, match="EntityAlreadyExists"):
        stack.apply()
    assert [call[0] for call in stack.calls].count("import") == ORPHAN_ROUNDS
