"""The README's demo, run as a reader runs it: `make demo` (a `make` subprocess at the suite's emulator, its Terraform
state in a workspace of its own: DEMO_WORKSPACE), then every command of its "After `make demo`" section as written
there, parsed from README.md. The operator tools' answers and the AWS CLI v1 line's are checked against a recount of
the downloads the demo writes (leaderboard_dev.demo draws them from a fixed seed), not against what the tools say.
The AWS CLI v2 line needs v2, which the project does not install: v1 (`make`'s .venv-awscli) refuses it, naming the
flag; its payload is answered in tests/unit/docs/test_readme_commands.py. The demo's stack is destroyed afterwards as
`make down` destroys it (leaderboard_dev.demo.take_down), leaving the suite's emulator running."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

import pytest
from botocore.exceptions import ClientError

from leaderboard_core.buckets import board_id, download_boards, utc_moment, window_keys
from leaderboard_dev import demo
from leaderboard_dev.aws import Clients
from leaderboard_dev.loadgen import zipf_downloads
from leaderboard_dev.settings import DEFAULT_ENDPOINT, EMULATOR_STACK, REPOSITORY, Endpoint

README = (REPOSITORY / "README.md").read_text()
DOWNLOADS, SONGS, SEED = 3000, 100, 2018
"""What `make demo` writes (`python -m leaderboard_dev demo`'s defaults), as the README promises: "3,000 downloads of
`song001` to `song100`"."""
TABLE = f"{demo.DEMO_STACK}-downloads"
FUNCTION = f"{demo.DEMO_STACK}-query"
AWS_CLI_V1 = REPOSITORY / ".venv-awscli" / "bin"
"""The AWS CLI v1 `make` installs (its target .venv-awscli/bin/aws), first on the commands' PATH."""
DEMO_TIMEOUT = 900
ONLY_ON = "localstack"
ONLY_ON_REASON = (
    "its stack applied and destroyed and its 3,000 downloads counted cost 90-130 s on two shared cores, and CI runs the"
    " suite on both emulators at once, MiniStack's minutes longer (the benchmark's smoke runs there); the commands are"
    " the README's on either, `make demo`'s `up` taking the emulator that answers at AWS_ENDPOINT_URL"
)


def section(title: str) -> str:
    return README.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


AFTER_DEMO = section("### After `make demo`")
LINES = [line for block in re.findall(r"```sh\n(.*?)```", AFTER_DEMO, flags=re.DOTALL) for line in block.splitlines()]
EXPORTS = [line for line in LINES if line.startswith("export ")]
TOOLS = [line for line in LINES if line.startswith(".venv/bin/leaderboard-tools ")]
INVOKES = [line for line in LINES if line.startswith("aws lambda invoke ")]
MOVED_PORT = re.search(r"`export AWS_ENDPOINT_URL=(http://127\.0\.0\.1:)\d+` for the commands above", AFTER_DEMO)
"""The README's way to point those commands at an emulator off port 4566."""


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


def flags(argv: list[str]) -> dict[str, list[str]]:
    """Each flag's values, in order (`--song` repeats)."""
    found: dict[str, list[str]] = {}
    for flag, value in itertools.pairwise(argv):
        if flag.startswith("--") and not value.startswith("--"):
            found.setdefault(flag, []).append(value)
    return found


# ---------------------------------------------------------------- the truth: a recount of the demo's downloads


def recount() -> dict[str, Counter[str]]:
    """Each board the demo fills and its songs' counts, from the downloads it writes."""
    boards: dict[str, Counter[str]] = {}
    for download in zipf_downloads(DOWNLOADS, songs=SONGS, seed=SEED):
        moment = utc_moment(download.timestamp)
        for board in download_boards(moment, demo.DEMO_PERIODS, demo.genre_of(download.song_id)):
            boards.setdefault(board, Counter())[download.song_id] += 1
    return boards


BOARDS = recount()
Row = tuple[int | None, str, int]
"""(rank or None where the command prints none, song, count)."""


def ordered(counts: Counter[str]) -> list[tuple[str, int]]:
    """A board's order (docs/query-contract.md): the count descending, then the song id ascending."""
    return sorted(counts.items(), key=lambda entry: (-entry[1], entry[0]))


def ranked(entries: list[tuple[str, int]]) -> list[Row]:
    return [(place, song, count) for place, (song, count) in enumerate(entries, start=1)]


def dense_among(entries: list[tuple[str, int]]) -> list[Row]:
    values = sorted({count for _, count in entries}, reverse=True)
    return [(values.index(count) + 1, song, count) for song, count in entries]


def board_of(given: dict[str, list[str]]) -> Counter[str]:
    key = given["--month"][0] if "--month" in given else given["--key"][0]
    category = given.get("--category", [None])[0]
    if "--last" in given:
        window: Counter[str] = Counter()
        for day in window_keys(given["--period"][0], key, int(given["--last"][0])):
            window.update(BOARDS.get(board_id(day, category), Counter()))
        return window
    return BOARDS.get(board_id(key, category), Counter())


@dataclass(frozen=True)
class Expected:
    rows: list[Row]
    said: list[str]
    """Lines the output holds besides its rows."""


def expected(argv: list[str]) -> Expected:
    """What a board command answers on the demo's boards, from the recount."""
    verb, given = argv[1], flags(argv)
    board = ordered(board_of(given))
    songs = given.get("--song", [])
    if verb == "top":
        return Expected(ranked(board)[: int(given.get("--limit", ["10"])[0])], [])
    if verb == "rank":
        place = [song for song, _ in board].index(songs[0])
        around = int(given["--around"][0])
        rows = ranked(board)[max(place - around, 0) : place + around + 1]
        return Expected(rows, [f"{songs[0]}: {board[place][1]} (rank {place + 1})"])
    if verb == "range":
        low, high = int(given["--from-rank"][0]), int(given["--to-rank"][0])
        return Expected(ranked(board)[low - 1 : high], [])
    if verb == "range-by-count":
        low, high = int(given["--min-count"][0]), int(given["--max-count"][0])
        return Expected([(None, song, count) for song, count in board if low <= count <= high], [])
    if verb == "card":
        return Expected([], [f"{len(board)} entries"])
    if verb == "score":
        return Expected([(None, songs[0], dict(board)[songs[0]])], [f"{songs[0]}: {dict(board)[songs[0]]}"])
    if verb == "reconcile":
        recounted = f"{len(board)} aggregates, {sum(count for _, count in board)} downloads recounted"
        return Expected([], [f"{given['--month'][0]}: {recounted} (count in DownloadCount, 1 leaderboard shard)"])
    if verb == "among":
        assert given["--rank-policy"] == ["dense"], argv
        return Expected(dense_among([(song, count) for song, count in board if song in songs]), [])
    raise AssertionError(f"no recount for {argv}")


# ---------------------------------------------------------------- what the commands print

_ROW = re.compile(r"^(?:(\d+)\s+)?(song\d{3})\s+(\d+)$")


def printed_rows(out: str) -> list[Row]:
    """The rows of the tables a board command prints (box-drawing and markers aside)."""
    rows = []
    for line in out.splitlines():
        cells = re.sub(r"[\u2500-\u257f|▶►>*]", " ", line).split()
        match = _ROW.match(" ".join(cells))
        if match:
            rank, song, count = match.groups()
            rows.append((int(rank) if rank else None, song, int(count)))
    return rows


# ---------------------------------------------------------------- the demo, deployed by `make demo`


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(path): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def holds_a_demo(aws: Clients) -> list[str]:
    """The demo's resources already at the emulator (a developer's `make demo` there): this test would take them over
    (an apply adopts what its stack's names hold) and destroy them."""
    held = []
    for name, describe in (
        (TABLE, lambda: aws.dynamodb.describe_table(TableName=TABLE)),
        (FUNCTION, lambda: aws.lambda_.get_function(FunctionName=FUNCTION)),
    ):
        try:
            describe()
        except ClientError as error:
            if error.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
        else:
            held.append(name)
    return held


def subprocess_environment(**extra: str) -> dict[str, str]:
    """This process's environment less the parent make's settings (its jobserver is not the child's)."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    }
    return environment | extra


@dataclass(frozen=True)
class Demo:
    made: subprocess.CompletedProcess[str]
    workspace: str
    own_demo_before: dict[str, bytes]


@pytest.fixture(scope="module")
def readme_demo(endpoint: Endpoint, emulator_kind: str, aws: Clients) -> Iterator[Demo]:
    """`make demo` at the suite's emulator, its state in a workspace of its own; destroyed afterwards as `make down`
    destroys it (the emulator is the suite's, left running), even when the demo failed."""
    if emulator_kind != ONLY_ON:
        pytest.skip(f"the README's demo is run on {ONLY_ON} only: {ONLY_ON_REASON}")
    held = holds_a_demo(aws)
    if held:
        pytest.skip(f"{endpoint.url} already holds a demo ({', '.join(held)}): this test would deploy the same names")
    workspace = f"readme-demo-{uuid.uuid4().hex[:6]}"
    own_demo = EMULATOR_STACK / "terraform.tfstate.d" / demo.DEMO_STACK
    before = files_under(own_demo)
    try:
        made = make_demo(workspace, endpoint, emulator_kind)
        yield Demo(made, workspace, before)
    finally:
        print(demo.take_down(endpoint, workspace))


def make_demo(workspace: str, endpoint: Endpoint, emulator_kind: str) -> subprocess.CompletedProcess[str]:
    """`make demo` as the README moves it to another port (`AWS_ENDPOINT_URL=… make demo`), in a process group of its
    own, ended whole if it runs past its time (its Python child must not apply while the stack is destroyed)."""
    argv = ["make", "demo", f"DEMO_WORKSPACE={workspace}"]
    environment = subprocess_environment(AWS_ENDPOINT_URL=endpoint.url, EMULATOR=emulator_kind)
    with subprocess.Popen(
        argv, cwd=REPOSITORY, env=environment, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True
    ) as running:
        try:
            out, err = running.communicate(timeout=DEMO_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGKILL)
            out, err = running.communicate()
    return subprocess.CompletedProcess(argv, running.returncode, out, err)


def test_make_demo_deploys_the_readme_s_stack_and_prints_each_month_s_top_10_as_recounted(
    readme_demo: Demo, aws: Clients
) -> None:
    made = readme_demo.made
    # then it succeeded, on the emulator already answering (not one of its own)
    assert made.returncode == 0, made.stdout[-4000:] + made.stderr[-4000:]
    assert "reusing the endpoint that answers at" in made.stdout
    # and each month's top 10, with its total, is the recount's
    for month in ("2018-01", "2018-02"):
        assert f"Top 10 songs, {month} ({sum(BOARDS[month].values())} downloads)" in " ".join(made.stdout.split())
    printed = printed_rows(made.stdout)
    assert printed == ranked(ordered(BOARDS["2018-01"]))[:10] + ranked(ordered(BOARDS["2018-02"]))[:10]
    # and the table and function the README names are there
    assert aws.dynamodb.describe_table(TableName=TABLE)["Table"]["TableName"] == TABLE
    assert aws.lambda_.get_function(FunctionName=FUNCTION)["Configuration"]["FunctionName"] == FUNCTION
    # and this checkout's own demo state is as it was, the demo's in its workspace
    assert files_under(EMULATOR_STACK / "terraform.tfstate.d" / demo.DEMO_STACK) == readme_demo.own_demo_before
    assert (EMULATOR_STACK / "terraform.tfstate.d" / readme_demo.workspace / "terraform.tfstate").is_file()


class Shell:
    """A reader's shell after `make demo`: the README's export line, then (where the suite's emulator is not at port
    4566) its line moving the port, then the command, each as written, run by bash with the AWS CLI v1 first on PATH
    and no AWS setting but the README's. Its folder links the checkout's .venv, so that `.venv/bin/…` is the README's,
    and answer.json lands there."""

    def __init__(self, endpoint: Endpoint, folder: Path) -> None:
        assert MOVED_PORT is not None, "the README no longer says how to point the commands at another port"
        assert endpoint.is_loopback, endpoint
        (folder / ".venv").symlink_to(REPOSITORY / ".venv")
        self.folder = folder
        moved = [] if endpoint.is_at(DEFAULT_ENDPOINT) else [f"export AWS_ENDPOINT_URL={MOVED_PORT[1]}{endpoint.port}"]
        self.preamble = [*EXPORTS, *moved]

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        environment = {name: value for name, value in subprocess_environment().items() if not name.startswith("AWS_")}
        environment["PATH"] = f"{AWS_CLI_V1}{os.pathsep}{environment.get('PATH', '')}"
        return subprocess.run(
            ["bash", "-c", "\n".join([*self.preamble, line])],
            cwd=self.folder,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture(scope="module")
def shell(readme_demo: Demo, endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Shell:
    """A reader's shell on the demo `make demo` deployed."""
    assert readme_demo.made.returncode == 0, "make demo failed: see the test of it"
    return Shell(endpoint, tmp_path_factory.mktemp("readme-shell"))


def test_the_section_s_commands_are_the_ones_run_here() -> None:
    # given the section's shell lines: the environment, the operator tools and the two AWS CLI lines
    assert len(EXPORTS) == 1
    assert EXPORTS[0].startswith(f"export AWS_ENDPOINT_URL={DEFAULT_ENDPOINT} ")
    assert MOVED_PORT is not None, "the README no longer says how to point the commands at another port"
    assert len(TOOLS) >= 4
    assert len(INVOKES) == 2
    assert sorted(LINES) == sorted(EXPORTS + TOOLS + INVOKES)
    # and the demo writes what the README says it holds
    assert f"{DOWNLOADS:,} downloads of `song001` to `song{SONGS:03d}`" in " ".join(AFTER_DEMO.split())


def tool_id(line: str) -> str:
    return " ".join(words(line)[1:2] + words(line)[4:])


@pytest.mark.parametrize("line", [line for line in TOOLS if words(line)[1] != "reconcile"], ids=tool_id)
def test_each_board_command_after_the_demo_answers_the_recount_of_its_downloads(line: str, shell: Shell) -> None:
    # given what the demo's downloads, recounted, say the command answers
    truth = expected(words(line))
    # when a reader's shell runs the README's line
    done = shell.run(line)
    # then it answers that
    assert done.returncode == 0, done.stdout + done.stderr
    assert printed_rows(done.stdout) == truth.rows, done.stdout
    for said in truth.said:
        assert said in done.stdout.splitlines(), done.stdout


@pytest.mark.parametrize("line", [line for line in TOOLS if words(line)[1] == "reconcile"], ids=tool_id)
def test_reconcile_after_the_demo_finds_the_board_exact_and_exits_0(line: str, shell: Shell) -> None:
    # when a reader's shell runs the README's line (recount the month's board from the downloads, compare)
    done = shell.run(line)
    # then it exits 0, as the README's comment says (every count the aggregator kept is its recount), having
    # recounted the demo's downloads of the month
    assert done.returncode == 0, done.stdout + done.stderr
    assert "exit 0" in line
    for said in expected(words(line)).said:
        assert said in done.stdout.splitlines(), done.stdout


def test_the_aws_cli_v1_invoke_line_answers_the_month_s_top_songs_as_recounted(shell: Shell) -> None:
    # given the README's v1 line, and the page its payload asks for
    (line,) = [line for line in INVOKES if line.endswith("# v1")]
    payload = json.loads(words(line)[words(line).index("--payload") + 1])
    # when a reader's shell runs it with the AWS CLI v1 `make` installs
    done = shell.run(line)
    # then the CLI reports the invocation, and answer.json (which the line prints) is the recount's page
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.split("}", 1)[0] + "}")["StatusCode"] == 200, done.stdout
    assert (shell.folder / "answer.json").is_file()
    answer = json.loads((shell.folder / "answer.json").read_text())
    top = ordered(BOARDS[payload["month"]])[: payload["limit"]]
    assert [(item["songID"], item["downloadCount"]) for item in answer["items"]] == top, answer
    assert answer["month"] == payload["month"]
    assert done.stdout.endswith((shell.folder / "answer.json").read_text())


def test_the_aws_cli_v2_invoke_line_is_refused_by_v1_naming_its_flag(shell: Shell) -> None:
    # given the README's v2 line (v1 reads the payload as it is; v2 needs the flag to do so), and no answer yet
    (line,) = [line for line in INVOKES if line.endswith("# v2")]
    (shell.folder / "answer.json").unlink(missing_ok=True)
    # when the AWS CLI v1 `make` installs runs it
    done = shell.run(line)
    # then v1 refuses the flag it does not know, naming it, and invokes nothing
    assert done.returncode == 255, done.stdout + done.stderr
    assert "Unknown options: --cli-binary-format" in done.stderr, done.stderr
    assert not (shell.folder / "answer.json").exists()
