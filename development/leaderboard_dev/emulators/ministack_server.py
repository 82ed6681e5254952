"""Run MiniStack in the foreground with fixes for its stream filters, Lambda's stream delivery and TTL's records.

MiniStack 1.5.33 evaluates `{"NewImage": {"Month": {"S": [{"exists": false}]}}}` as false
when `Month` is absent, so it drops exactly the records the pattern selects. AWS matches
patterns on leaf paths: an absent parent means every leaf below it is absent, and
`exists: false` holds. MiniStack also lets an absent field match `anything-but` (and `null`),
where "the event must contain all the field names listed in the event pattern" (EventBridge,
whose syntax Lambda's filters use): an absent leaf matches `exists: false` only. This wrapper
gives MiniStack those semantics before it starts; the module keeps the patterns AWS documents.

Its DynamoDB-stream mappings are delivered by the project's emulation of Lambda's stream
delivery (tumbling windows, retries, bisection, partial batch responses, record age, failure
records): see ``ministack_stream_mapping``. Its TTL expiry writes the REMOVE records AWS writes, with TTL's
userIdentity, and it answers ``DELETE /_aws/dynamodb/expired`` as LocalStack does: see ``ministack_ttl``.
"""

from __future__ import annotations

import sys
from typing import Any

from ministack import app
from ministack.services import lambda_svc

from leaderboard_dev.emulators import ministack_stream_mapping, ministack_ttl

_original_match = lambda_svc._match_esm_filter


def match_with_absent_parents(record: Any, pattern: Any) -> bool:
    if isinstance(record, dict) and isinstance(pattern, dict):
        absent = {key: sub_pattern for key, sub_pattern in pattern.items() if key not in record}
        if any(isinstance(rules, list) and not _matches_absence(rules) for rules in absent.values()):
            return False
        parents = [key for key, sub_pattern in absent.items() if isinstance(sub_pattern, dict)]
        if parents:
            record = {**record, **{key: {} for key in parents}}
    return _original_match(record, pattern)


def _matches_absence(rules: list[Any]) -> bool:
    return any(isinstance(rule, dict) and rule.get("exists") is False for rule in rules)


def main() -> None:
    lambda_svc._match_esm_filter = match_with_absent_parents
    ministack_stream_mapping.install()
    ministack_ttl.install()
    sys.argv = [sys.argv[0]]
    app.main()


if __name__ == "__main__":
    main()
