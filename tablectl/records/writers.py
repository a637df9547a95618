"""Writing sheets as files: one CSV (with a header) or JSON-lines file per sheet and format.

Values are written as the rows hold them: money in integer cents (contributions in
ten-thousandths of a cent), times as the journal's UTC stamp plus the local date and time;
in CSV an absent value is an empty cell and a flag is true/false. Every sheet gets its file,
empty ones too, so an export always has the same set of files.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from tablectl.records.sheets import Row, Sheet, columns

TextFormat = Literal["csv", "jsonl"]


@dataclass(frozen=True, slots=True)
class WrittenFile:
    name: str
    sheet: Sheet
    format: TextFormat
    rows: int


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


class _SheetFile:
    def __init__(self, path: Path, sheet: Sheet, fmt: TextFormat) -> None:
        self.path, self.sheet, self.format = path, sheet, fmt
        self.rows = 0
        self._file: IO[str] = path.open("w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._file) if fmt == "csv" else None
        if self._csv is not None:
            self._csv.writerow(columns(sheet))

    def write(self, row: Row) -> None:
        self.rows += 1
        if self._csv is not None:
            self._csv.writerow([_cell(v) for v in row.model_dump().values()])
        else:
            self._file.write(json.dumps(row.model_dump(mode="json")) + "\n")

    def close(self) -> WrittenFile:
        self._file.close()
        return WrittenFile(self.path.name, self.sheet, self.format, self.rows)


class SheetFiles:
    """A `RowSink` writing every sheet in each of the text formats asked for."""

    def __init__(self, directory: Path, formats: tuple[TextFormat, ...]) -> None:
        self._files: dict[Sheet, list[_SheetFile]] = {
            sheet: [_SheetFile(directory / f"{sheet}.{fmt}", sheet, fmt) for fmt in formats]
            for sheet in Sheet
        }

    def __call__(self, sheet: Sheet, row: Row) -> None:
        for f in self._files[sheet]:
            f.write(row)

    def close(self) -> list[WrittenFile]:
        return [f.close() for files in self._files.values() for f in files]
