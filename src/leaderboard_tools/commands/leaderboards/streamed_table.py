"""A table printed row by row as its rows arrive: boxed as rich draws its tables, its column widths fixed by the rows
it is sized with (a listing's first page), so that a page printed now lines up with the pages printed after it.

A text cell longer than its column folds onto the lines below, within the column (rich's `overflow="fold"`); a
number is never split: a longer one widens its own row. The box is Unicode where the output's encoding is UTF
(or unknown), ASCII elsewhere; a marked row is bold on a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.cells import cell_len

MAX_TEXT_WIDTH = 48
"""The widest a text column is sized (an id past it folds)."""


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False
    """Right-aligned and never folded."""
    spare: int = 0
    """Characters added to the width the first rows need (a rank grows page after page)."""
    minimum: int = 0
    """The narrowest the column is sized (ids on later pages may be longer than the first page's)."""


@dataclass(frozen=True)
class Box:
    top: str
    head: str
    rule: str
    row: str
    bottom: str
    """Each: left, fill, junction, right (head and row: left, separator, right, and a space as fill)."""


UNICODE = Box("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "└─┴┘")
ASCII = Box("+-++", "| ||", "+=++", "| ||", "+-++")


def box_for(out: TextIO) -> Box:
    encoding = (getattr(out, "encoding", None) or "utf-8").lower().replace("-", "")
    return UNICODE if encoding.startswith("utf") else ASCII


class StreamedTable:
    """Rows printed and flushed as they come; `close()` draws the bottom line (nothing if no row was printed)."""

    def __init__(self, out: TextIO, columns: Sequence[Column], first_rows: Sequence[Sequence[str]]) -> None:
        self._out, self._columns, self._box = out, list(columns), box_for(out)
        self.widths = [
            min(
                max([column.minimum, cell_len(column.header), *(cell_len(row[index]) for row in first_rows)])
                + column.spare,
                10**6 if column.numeric else max(MAX_TEXT_WIDTH, cell_len(column.header)),
            )
            for index, column in enumerate(self._columns)
        ]
        self._opened = False
        self._bold = bool(getattr(out, "isatty", lambda: False)())

    def _line(self, pieces: str) -> str:
        left, fill, junction, right = pieces
        return left + junction.join(fill * (width + 2) for width in self.widths) + right

    def _cells(self, pieces: str, cells: Sequence[str]) -> str:
        left, _, separator, right = pieces
        shown = [
            (cell.rjust(width) if column.numeric else cell + " " * max(0, width - cell_len(cell)))
            for cell, width, column in zip(cells, self.widths, self._columns, strict=True)
        ]
        return left + separator.join(f" {cell} " for cell in shown) + right

    def _print(self, line: str, bold: bool = False) -> None:
        print(f"\x1b[1m{line}\x1b[0m" if bold and self._bold else line, file=self._out)

    def row(self, cells: Sequence[str], marked: bool = False) -> None:
        if not self._opened:
            self._print(self._line(self._box.top))
            self._print(self._cells(self._box.head, [column.header for column in self._columns]))
            self._print(self._line(self._box.rule))
            self._opened = True
        folded = [
            [cell] if column.numeric else _fold(cell, width)
            for cell, width, column in zip(cells, self.widths, self._columns, strict=True)
        ]
        for line in range(max(len(parts) for parts in folded)):
            self._print(
                self._cells(self._box.row, [parts[line] if line < len(parts) else "" for parts in folded]), marked
            )

    def rows(self, rows: Sequence[Sequence[str]], marked: Sequence[bool] = ()) -> None:
        for index, cells in enumerate(rows):
            self.row(cells, index < len(marked) and marked[index])
        self._out.flush()

    def close(self) -> None:
        if self._opened:
            self._print(self._line(self._box.bottom))
            self._out.flush()


def _fold(text: str, width: int) -> list[str]:
    """The text in pieces of at most `width` terminal cells (at least one character each)."""
    pieces: list[str] = []
    current = ""
    for character in text:
        if current and cell_len(current + character) > width:
            pieces.append(current)
            current = ""
        current += character
    return [*pieces, current]
