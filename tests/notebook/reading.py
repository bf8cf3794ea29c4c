"""Reading a report's or a result's HTML back as a person sees it: its headline, its tables
(cell texts, row by row), the lines under them, and the styles its elements wear."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Page:
    title: str = ""
    tables: list[list[list[str]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # text of the divs outside tables
    row_styles: list[str] = field(default_factory=list)  # the style of every <tr>
    mark_colours: list[tuple[str, str]] = field(default_factory=list)  # (mark, colour)

    def table_with(self, header: str) -> list[list[str]]:
        """The table whose first row holds ``header``, without that row."""
        for table in self.tables:
            if table and header in table[0]:
                return table[1:]
        raise AssertionError(f"no table with a {header!r} column: {self.tables}")

    def line_with(self, start: str) -> str | None:
        return next((line for line in self.lines if line.startswith(start)), None)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.page = Page()
        self._depth_in_table = 0
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._div: list[list[str]] = []
        self._colour: list[str | None] = []
        self._title_div = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        style = dict(attrs).get("style") or ""
        if tag == "table":
            self._depth_in_table += 1
            self.page.tables.append([])
        elif tag == "tr":
            self._row = []
            self.page.row_styles.append(style)
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "div" and not self._depth_in_table:
            self._div.append([])
            self._title_div = "font-size:14px" in style
        if tag == "span":
            found = re.search(r"(?:^|;)color:(#[0-9a-f]{6})", style)
            self._colour.append(found.group(1) if found else None)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._depth_in_table -= 1
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.page.tables[-1].append(self._row)
            self._row = None
        elif tag == "div" and self._div and not self._depth_in_table:
            text = " ".join("".join(self._div.pop()).split())
            if self._title_div:
                self.page.title, self._title_div = text, False
            elif text:
                self.page.lines.append(text)
        elif tag == "span" and self._colour:
            self._colour.pop()

    def handle_data(self, data: str) -> None:
        if self._colour and self._colour[-1] is not None and data.strip():
            self.page.mark_colours.append((data.strip().rstrip("\ufe0e"), self._colour[-1]))
        if self._cell is not None:
            self._cell.append(data)
        elif self._div and not self._depth_in_table:
            for part in self._div:
                part.append(data)


def read_page(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    return reader.page


def number(text: str) -> int:
    """``1,234`` -> 1234."""
    return int(text.replace(",", ""))
