"""The README and docs/ hold together: every relative link and anchor resolves, and the README's Layout
names only folders and files that exist and every top-level folder the repository tracks.

Pages moved (the README is for the module's users, the rest is in docs/); a link left
pointing at a section that moved would fail silently on GitHub, so it fails here.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from leaderboard_dev.settings import REPOSITORY

README = REPOSITORY / "README.md"
PAGES = sorted(
    [
        README,
        REPOSITORY / "CHANGELOG.md",
        *(REPOSITORY / "docs").glob("*.md"),
        *(REPOSITORY / "terraform" / "examples").glob("*/README.md"),
        *(REPOSITORY / "docs" / "benchmark-results").glob("*.md"),
    ]
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def prose(page: Path) -> str:
    """The page without its fenced code blocks, where brackets and hashes are not Markdown."""
    return FENCE.sub("", page.read_text())


def anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", prose(page), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        ids.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return ids | set(re.findall(r'<a name="([^"]+)"', page.read_text()))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPOSITORY)))
def test_every_relative_link_and_anchor_of_the_page_resolves(page: Path) -> None:
    # given the page's links to files of the repository and to headings
    targets = [target for target in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", target)]

    # when each is resolved from the page's folder
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading")

    # then
    assert broken == []


def test_the_layout_names_what_exists_and_a_home_for_every_tracked_file() -> None:
    # given the first column of the README's Layout table
    section = README.read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    first_column = [row.split("|")[1] for row in section.splitlines() if row.startswith("| `")]
    named = [name for cell in first_column for name in re.findall(r"`([^`]+)`", cell)]
    listing = subprocess.run(["git", "ls-files"], cwd=REPOSITORY, capture_output=True, text=True, check=True)
    tracked = listing.stdout.split()

    # when
    missing = [name for name in named if not (REPOSITORY / name).exists()]
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path and not path.startswith(".")}
    unnamed = sorted(folder for folder in folders if not any(name.split("/", 1)[0] == folder for name in named))

    outside = sorted(
        path
        for path in tracked
        if "/" in path
        and not path.startswith(".")
        and not any(path.startswith(name.rstrip("/") + "/") for name in named)
    )

    # then
    assert missing == [], "the Layout names paths that do not exist"
    assert unnamed == [], "the Layout leaves out top-level folders"
    assert outside == [], "the Layout's first column leaves these files in no named folder"


def test_the_layout_names_every_example_of_the_module() -> None:
    # given the README Layout's row of the module, and the examples terraform/examples holds
    section = README.read_text().split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    (row,) = [line for line in section.splitlines() if line.startswith("| `terraform/`")]
    examples = sorted(path.name for path in (REPOSITORY / "terraform" / "examples").iterdir() if path.is_dir())
    assert len(examples) >= 4
    # then the row names each of them
    assert [example for example in examples if f"`{example}`" not in row] == []


DOCS = sorted((REPOSITORY / "docs").glob("*.md"))
PAGES = sorted((REPOSITORY / "docs").rglob("*.md"))
"""Every page under docs/, those of its folders (the benchmark's summary) included."""
README_LINES, PAGE_LINES = 300, 400
"""The house's bars: past them a page holds more than one subject, and a section moves to a page of its own."""


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda page: str(page.relative_to(REPOSITORY)))
def test_the_readme_stays_within_300_lines_and_every_docs_page_within_400(page: Path) -> None:
    # given the page's bar
    bar = README_LINES if page == README else PAGE_LINES

    # when its lines are counted
    lines = len(page.read_text().splitlines())

    # then
    assert lines <= bar, f"{page.name} has {lines} lines, over {bar}: move a section to a page of its own"


def test_the_readme_s_documentation_table_links_every_docs_page() -> None:
    # given the README's Documentation table
    section = README.read_text().split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]

    # when its links are resolved
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in LINK.findall(section)}

    # then every page of docs/ is one of them
    assert [page.name for page in DOCS if page.resolve() not in linked] == []
