"""The javaagent the LocalStack setup gives DynamoDB Local: it indexes the stream records by stream by rewriting one
statement in DynamoDB Local's class file, and changes nothing DynamoDB Local accepts or answers."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import zipfile
from pathlib import Path

import pytest

from leaderboard_dev.emulators import localstack
from leaderboard_dev.emulators.lifecycle import cache_root

AGENT_SOURCE = Path(localstack.__file__).parent / "localstack_runtime" / "DynamoDBLocalAgent.java"

RUNNER = """
import java.nio.file.Files;
import java.nio.file.Path;

public class Runner {
    public static void main(String[] args) throws Exception {
        byte[] original = Files.readAllBytes(Path.of(args[0]));
        byte[] patched = DynamoDBLocalAgent.replaceString(
                original, DynamoDBLocalAgent.STREAM_RECORDS_TABLE, DynamoDBLocalAgent.INDEXED_STREAM_RECORDS_TABLE);
        if (patched == null) {
            System.out.println("not found");
            return;
        }
        ClassLoader loader = new ClassLoader(Runner.class.getClassLoader()) {
            @Override
            protected Class<?> findClass(String name) {
                return defineClass(name, patched, 0, patched.length);
            }
        };
        Class<?> holder = loader.loadClass("Holder");
        System.out.println(holder.getField("STATEMENT").get(null));
        System.out.println(holder.getField("OTHER").get(null));
    }
}
"""


def java_string(name: str) -> str:
    """A statement as the agent's source spells it (its concatenated literals joined)."""
    match = re.search(rf"{name} =\s*((?:\"[^\"]*\"\s*\+?\s*)+);", AGENT_SOURCE.read_text())
    assert match is not None, name
    return "".join(re.findall(r"\"([^\"]*)\"", match.group(1)))


STATEMENT = java_string("STREAM_RECORDS_TABLE")
INDEXED = java_string("INDEXED_STREAM_RECORDS_TABLE")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent, a runner that patches a class file with it, and two holder classes: one holding DynamoDB Local's
    statement beside another constant, one without it."""
    try:
        jdk = localstack._find_jdk()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    work = tmp_path_factory.mktemp("agent")
    (work / "Runner.java").write_text(RUNNER)
    (work / "with").mkdir()
    (work / "without").mkdir()
    holder = (
        'public class Holder {{ public static final String STATEMENT = "{0}"; public static String OTHER = "{1}"; }}'
    )
    (work / "with" / "Holder.java").write_text(holder.format(STATEMENT, "kept as it was"))
    (work / "without" / "Holder.java").write_text(holder.format("SELECT 1;", "kept as it was"))
    javac = str(jdk / "bin" / "javac")
    subprocess.run([javac, "-d", str(work), str(AGENT_SOURCE), str(work / "Runner.java")], check=True)
    for variant in ("with", "without"):
        subprocess.run([javac, "-d", str(work / variant), str(work / variant / "Holder.java")], check=True)
    return work


def patched(compiled: Path, variant: str) -> list[str]:
    java = str(localstack._find_jdk() / "bin" / "java")
    holder = compiled / variant / "Holder.class"
    result = subprocess.run(
        [java, "-cp", str(compiled), "Runner", str(holder)], check=True, capture_output=True, text=True
    )
    return result.stdout.splitlines()


def test_the_agent_rewrites_the_stream_records_table_statement_and_leaves_every_other_constant(compiled: Path) -> None:
    # given a class holding DynamoDB Local's statement for its stream records table beside another constant
    # when the agent's transform patches it and the JVM loads the result
    lines = patched(compiled, "with")
    # then the statement is the indexed one, and the other constant is unchanged
    assert lines == [INDEXED, "kept as it was"]


def test_a_class_without_the_statement_is_left_to_the_jvm_as_it_is(compiled: Path) -> None:
    assert patched(compiled, "without") == ["not found"]


def test_the_indexed_table_accepts_and_refuses_what_dynamodb_locals_own_does_and_answers_its_lookup_by_index() -> None:
    # given both statements, each creating the stream records table in SQLite
    plain, indexed = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    plain.execute(STATEMENT)
    indexed.execute(INDEXED)
    rows = [("stream-a", "shard-1", 1), ("stream-b", "shard-2", 2), ("stream-a", "shard-1", 3), ("stream-b", "x", 1)]
    # when the same rows are inserted into both, one repeating a sequence number
    outcomes = []
    for connection in (plain, indexed):
        accepted = []
        for stream, shard, sequence in rows:
            try:
                connection.execute(
                    "INSERT INTO us (StreamID, ShardID, SequenceNumber) VALUES (?, ?, ?)", (stream, shard, sequence)
                )
                accepted.append(sequence)
            except sqlite3.IntegrityError:
                accepted.append(None)
        outcomes.append(accepted)
    # then both accept and refuse the same rows, and the lowest sequence number of a stream comes from the index
    assert outcomes[0] == outcomes[1] == [1, 2, 3, None]
    lookup = "SELECT MIN(SequenceNumber) FROM us WHERE StreamID = ?"
    assert indexed.execute(lookup, ("stream-a",)).fetchone() == plain.execute(lookup, ("stream-a",)).fetchone()
    plans = [
        " ".join(row[-1] for row in connection.execute("EXPLAIN QUERY PLAN " + lookup, ("stream-a",)))
        for connection in (plain, indexed)
    ]
    assert "INDEX" not in plans[0], "DynamoDB Local's own table walks every stream's records in sequence order"
    assert "USING COVERING INDEX" in plans[1], plans[1]
    assert "(StreamID=?)" in plans[1], plans[1]


def test_dynamodb_locals_class_holds_the_statement_the_agent_rewrites() -> None:
    # given the DynamoDB Local the LocalStack setup provisioned (skipped where it has not been)
    jars = sorted((cache_root() / "localstack" / "libs" / "dynamodb-local").glob("*/DynamoDBLocal.jar"))
    if not jars:
        pytest.skip("DynamoDB Local is not provisioned here (make up EMULATOR=localstack)")
    # when its class that creates the stream records table is read
    with zipfile.ZipFile(jars[-1]) as jar:
        class_file = jar.read("com/amazonaws/services/dynamodbv2/local/shared/access/sqlite/SQLiteDBAccess$1.class")
    # then it holds the agent's statement exactly (else the agent would warn and leave it unindexed)
    assert STATEMENT.encode() in class_file
