"""This repository's working tree elsewhere: its files copied (what `pip install .` builds from), or a clone whose
HEAD commit is exactly the working tree under test (what `make release` tags), committed or not."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from leaderboard_dev.settings import REPOSITORY

IDENTITY = ("-c", "user.name=release-test", "-c", "user.email=release-test@example.com")


def git(directory: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *arguments], cwd=directory, check=True, capture_output=True, text=True
    ).stdout.strip()


def copy_working_tree(destination: Path, repository: Path = REPOSITORY) -> Path:
    """The tracked files and the untracked ones git does not ignore, as they are on disk (deleted ones left out)."""
    for name in git(repository, "ls-files", "--cached", "--others", "--exclude-standard", "-z").split("\0"):
        source = repository / name
        if name and source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


def clone_of_working_tree(destination: Path, repository: Path = REPOSITORY) -> str:
    """A clone without tags whose HEAD is one commit on top of this HEAD holding the working tree; a git identity is
    configured in it (tags are annotated). Returns that commit."""
    git(repository.parent, "clone", "--quiet", "--no-tags", "--no-checkout", str(repository), str(destination))
    # HEAD on this HEAD's commit with an empty index and no files: the commit below holds the copy alone
    git(destination, "update-ref", "refs/heads/release-test", git(repository, "rev-parse", "HEAD"))
    git(destination, "symbolic-ref", "HEAD", "refs/heads/release-test")
    copy_working_tree(destination, repository)
    git(destination, "add", "--all")
    git(destination, "commit", "--quiet", "--allow-empty", "-m", "the working tree under test")
    git(destination, "config", "user.name", "release-test")
    git(destination, "config", "user.email", "release-test@example.com")
    return git(destination, "rev-parse", "HEAD")
