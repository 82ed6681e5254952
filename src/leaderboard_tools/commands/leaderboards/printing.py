"""How the board commands print an answer: a whole answer at once (a table, or tab-separated lines), or a listing
page by page as it arrives (JSON written item by item, text a line per entry, a table whose column widths the first
page fixes)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TextIO

from leaderboard_core.attributes import COUNT_FIELD
from leaderboard_tools.commands.leaderboards.flags import LISTED_ID_WIDTH
from leaderboard_tools.commands.leaderboards.streamed_table import Column, StreamedTable
from leaderboard_tools.output_format import OutputFormat

# ---------------------------------------------------------------- what is printed


def board_title(answer: dict[str, Any]) -> str:
    if "month" in answer:
        where = f"month {answer['month']}"
    elif answer.get("period") == "all":
        where = "all time"
    else:
        where = f"{answer.get('period')} {answer.get('key')}"
    if "last" in answer:
        where = f"last {answer['last']} {answer.get('period', 'month')}s to {answer.get('key', answer.get('month'))}"
    return where + (f", category {answer['category']}" if "category" in answer else "")


def text_of(value: Any) -> str:
    """A value as the AWS CLI's text output prints it: None for null, True/False, numbers and strings as they are."""
    return str(value)


@dataclass
class Listed:
    """What a listing printed so far: entries, and the token to resume it from (None once it is complete)."""

    entries: int = 0
    resume: str | None = None
    started: bool = False


class ListingPrinter:
    """A listing printed page by page in the chosen format; `finish` closes it with the token to resume from."""

    def __init__(
        self, out: TextIO, output: OutputFormat, title: str, entity_field: str, ranked: bool, listed: Listed
    ) -> None:
        self.out, self.output, self.title, self.entity_field, self.ranked = out, output, title, entity_field, ranked
        self.listed = listed
        self._table: StreamedTable | None = None
        self._first: dict[str, Any] | None = None

    def row(self, item: dict[str, Any]) -> list[str]:
        cells = [text_of(item.get(self.entity_field)), text_of(item.get(COUNT_FIELD))]
        return [text_of(item.get("rank")), *cells] if self.ranked else cells

    def columns(self) -> list[Column]:
        entity = [Column(self.entity_field, minimum=LISTED_ID_WIDTH), Column(COUNT_FIELD, numeric=True)]
        return [Column("#", numeric=True, spare=1), *entity] if self.ranked else entity

    def page(self, answer: dict[str, Any]) -> None:
        items = answer.get("items", [])
        if self._first is None:
            self._first = answer
            self._start(answer)
        if self.output == "json":
            for place, item in enumerate(items, start=self.listed.entries):
                print(("\n" if not place else ",\n") + json.dumps(item), end="", file=self.out)
        elif self.output == "text":
            for item in items:
                print("\t".join(self.row(item)), file=self.out)
        elif items:
            rows = [self.row(item) for item in items]
            if self._table is None:
                self._table = StreamedTable(self.out, self.columns(), rows)
            self._table.rows(rows)
        self.listed.entries += len(items)
        self.listed.resume = answer.get("next_token")
        self.out.flush()

    def _start(self, answer: dict[str, Any]) -> None:
        if self.output == "json":
            named = {name: value for name, value in answer.items() if name not in ("items", "next_token")}
            print(json.dumps(named)[:-1] + (", " if named else "") + '"items": [', end="", file=self.out)
        elif self.output == "table":
            print(f"{self.title} · {board_title(answer)}", file=self.out)
        self.listed.started = True

    def finish(self, resume: str | None) -> None:
        """The listing's end: what follows its last entry, and the token to resume from if it stopped before its end."""
        if self.output == "json":
            if self._first is None:
                print('{"items": [', end="", file=self.out)
            print(("\n" if self.listed.entries else "") + '], "next_token": ' + json.dumps(resume) + "}", file=self.out)
        elif self.output == "text":
            if resume is not None:
                print(f"NEXTTOKEN\t{resume}", file=self.out)
        else:
            if self._table is not None:
                self._table.close()
            else:
                print("no entries", file=self.out)
            if resume is not None:
                print(f"NextToken: {resume}", file=self.out)
                print("(give it to --starting-token, with the same flags, for the entries after these)", file=self.out)
        self.out.flush()


def print_rows(
    out: TextIO,
    output: OutputFormat,
    title: str,
    columns: list[Column],
    rows: list[list[str]],
    notes: list[str],
    marked: list[bool] | None = None,
) -> None:
    """A whole answer at once: a table with its title and notes, or its rows as tab-separated lines."""
    if output == "text":
        for cells in rows:
            print("\t".join(cells), file=out)
        return
    print(title, file=out)
    if rows:
        table = StreamedTable(out, columns, rows)
        table.rows(rows, marked or [])
        table.close()
    for note in notes:
        print(note, file=out)


def ranked_columns(entity_field: str) -> list[Column]:
    return [Column("#", numeric=True), Column(entity_field), Column(COUNT_FIELD, numeric=True)]
