"""The glossary of docs/design.md points at real code: every place its "Where it is defined" column names exists.

A reference is a path (`terraform/lambda.tf`, `leaderboard_tools/reconcile/recount.py`, `leaderboard_tools/backfill/`),
a file of the Lambdas or the tools (`catch_up.py`), a module (`shard_reader`, `leaderboard_core.claims`) or a name
defined in one (`delivery.Delivery`, `leaderboard_core.bookkeeping.RECOUNT_BAND`, `delivery.Delivery.is_direct`).
Names are found by reading the module, not importing it: a handler's module creates clients when imported.

The glossary is complete where the project can say so itself: every variable of terraform/variables.tf that names a
concept (all but the plain settings `SETTINGS` lists: AWS's own arguments passed through, names, packaging, sizes, the
attribute names of concepts that have rows) and every kind of report the aggregator sends (a `"kind"` in
lambda_src/aggregator) is named in a row, in backticks. A variable added to the module fails here until it is given a
row or listed as a setting.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]
DESIGN = REPOSITORY / "docs" / "design.md"
VARIABLES = REPOSITORY / "terraform" / "variables.tf"
AGGREGATOR = REPOSITORY / "lambda_src" / "aggregator"
ROOTS = (REPOSITORY, REPOSITORY / "src", REPOSITORY / "lambda_src")
MODULE_FOLDERS = (
    REPOSITORY / "lambda_src" / "aggregator",
    REPOSITORY / "lambda_src" / "query",
    REPOSITORY / "lambda_src",
    REPOSITORY / "src",
    REPOSITORY / "src" / "leaderboard_tools",
)


SETTINGS = frozenset(
    {
        # what the module is called, where it runs, what it is tagged and encrypted with
        *("create", "name", "tags", "kms_key_arn", "role_path", "role_permissions_boundary", "code_signing_config_arn"),
        "leaderboard_index_name",
        # the table's own settings, passed to DynamoDB as they are
        *("billing_mode", "table_read_capacity", "table_write_capacity", "index_read_capacity", "index_write_capacity"),
        *("point_in_time_recovery_enabled", "deletion_protection_enabled"),
        # the attribute names of concepts with rows of their own (download, aggregate, order)
        *("sort_key_attribute_name", "timestamp_attribute_name", "count_attribute_name", "order_attribute_name"),
        # where the functions' code comes from
        *("aggregator_package_path", "query_package_path", "package_s3_bucket", "lambda_runtime"),
        *("aggregator_package_s3_key", "query_package_s3_key"),
        *("aggregator_package_source_code_hash", "query_package_source_code_hash"),
        # the functions' sizes and limits, passed to Lambda and CloudWatch Logs
        *("aggregator_memory_size", "aggregator_timeout", "aggregator_write_concurrency", "query_timeout"),
        *("aggregator_deadline_margin_ms", "query_memory_size", "reserved_concurrent_executions"),
        *("log_retention_in_days", "tracing_mode"),
        # the stream mapping's and the failure queue's AWS settings
        *("batch_size", "maximum_batching_window_in_seconds", "maximum_retry_attempts", "starting_position"),
        *("maximum_record_age_in_seconds", "parallelization_factor", "failure_queue_message_retention_seconds"),
        # the alarms
        *("create_alarms", "create_alarm_sns_topic", "alarm_sns_topic_arn", "alarm_iterator_age_threshold_seconds"),
    }
)
"""The variables of terraform/variables.tf that are plain settings, not concepts: the glossary need not name them."""


def glossary_cells() -> list[list[str]]:
    """The cells (term, what it is, where it is defined) of every row of the glossary's table."""
    section = DESIGN.read_text().split("## Glossary", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")]
    return [cells for cells in rows[1:] if len(cells) == 3]


def glossary_rows() -> list[tuple[str, str]]:
    """(term, where it is defined) of every row of the glossary's table."""
    return [(cells[0], cells[-1]) for cells in glossary_cells()]


def glossary_names() -> set[str]:
    """Every name a row's term or text gives in backticks (each word of `stream_readers = 1`)."""
    spans = [span for cells in glossary_cells() for span in re.findall(r"`([^`]+)`", f"{cells[0]} {cells[1]}")]
    return {word for span in spans for word in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", span)}


def module_variables() -> list[str]:
    return re.findall(r'^variable "(\w+)"', VARIABLES.read_text(), flags=re.MULTILINE)


def report_kinds() -> set[str]:
    """Every `"kind"` of a message the aggregator sends (to the failure queue or the band queue)."""
    kinds: set[str] = set()
    for module in AGGREGATOR.glob("*.py"):
        text = module.read_text()
        kinds.update(re.findall(r'"kind":\s*"([a-z_]+)"', text), re.findall(r'\w+_KIND\s*=\s*"([a-z_]+)"', text))
    return kinds


def references(where: str) -> list[str]:
    return re.findall(r"`([^`]+)`", where)


def _module_file(dotted: list[str]) -> Path | None:
    for folder in MODULE_FOLDERS:
        path = folder.joinpath(*dotted)
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def _defines(tree: ast.AST, names: list[str]) -> bool:
    """Whether `names` (a top-level name, then attributes of the class it names) is defined in the module's tree."""
    body = getattr(tree, "body", [])
    for node in body:
        defined: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined = [node.name]
        elif isinstance(node, ast.Assign):
            targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            defined = [target.id for target in targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined = [node.target.id]
        if names[0] in defined:
            return len(names) == 1 or _defines(node, names[1:])
    return False


def resolves(reference: str) -> bool:
    """Whether the reference names a path, a file, a module or a name defined in a module of the project."""
    if "/" in reference:
        return any((root / reference).exists() for root in ROOTS)
    if reference.endswith(".py"):
        return _module_file([reference.removesuffix(".py")]) is not None
    parts = reference.split(".")
    for split in range(len(parts), 0, -1):
        module = _module_file(parts[:split])
        if module is not None:
            return split == len(parts) or _defines(ast.parse(module.read_text()), parts[split:])
    return False


def test_the_glossary_has_its_terms() -> None:
    # given the glossary, when its rows are read, then the terms the code and the issue name are among them
    terms = " ".join(term for term, _ in glossary_rows())
    for term in (
        "progress table",
        "claim",
        "named record",
        "segment",
        "phase",
        "read context",
        "query kind",
        "downloads table",
        "aggregates table",
    ):
        assert f"**{term}**" in terms, term


def test_the_glossary_names_every_variable_of_the_module_that_is_a_concept() -> None:
    # given the module's variables, less the plain settings
    concepts = [variable for variable in module_variables() if variable not in SETTINGS]
    assert len(concepts) >= 20
    # when the names the glossary's rows give are read, then every concept is among them
    named = glossary_names()
    assert [variable for variable in concepts if variable not in named] == []


def test_every_setting_the_glossary_leaves_out_is_a_variable_of_the_module() -> None:
    # given the settings left out, then each is still a variable (a renamed or removed one must leave the list too)
    assert sorted(SETTINGS - set(module_variables())) == []


def test_the_glossary_names_every_kind_of_report_the_aggregator_sends() -> None:
    # given every kind of message the aggregator's modules send
    kinds = report_kinds()
    assert {"rejected_download", "refused_record", "records_trimmed", "recount_band"} <= kinds
    # then each is named in the glossary
    assert sorted(kinds - glossary_names()) == []


def test_every_place_the_glossary_names_exists() -> None:
    # given every reference of the glossary's "Where it is defined" column
    named = [(term, reference) for term, where in glossary_rows() for reference in references(where)]
    assert len(named) > 30
    # when each is looked up, then it is a path, a file, a module or a name defined where it says
    missing = [f"{term}: {reference}" for term, reference in named if not resolves(reference)]
    assert missing == []


def test_a_reference_to_nothing_does_not_resolve() -> None:
    # given references to a file, a module, a name and a nested name that do not exist, then none resolves
    for reference in ("terraform/nothing.tf", "nothing.py", "delivery.Nothing", "delivery.Delivery.nothing"):
        assert not resolves(reference), reference
    # and their real neighbours do
    for reference in ("terraform/lambda.tf", "catch_up.py", "delivery.Delivery", "delivery.Delivery.is_direct"):
        assert resolves(reference), reference
