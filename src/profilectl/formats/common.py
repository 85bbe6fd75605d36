"""CSV helpers shared by the readers: header checks, rows with line numbers, numbers."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterable, Iterator

from profilectl.errors import FormatError


def csv_header(path: Path) -> list[str]:
    try:
        with open(path, newline="", errors="replace") as fh:
            return next(csv.reader(line for line in fh if not line.startswith("==")), [])
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    except csv.Error as exc:
        raise FormatError(f"{path}: not a CSV file ({exc})") from None


def read_csv(path: Path, required: Iterable[str], skip_prefix: str | None = None) -> Iterator[tuple[int, dict[str, str]]]:
    """Rows of a CSV file as dicts with their line numbers, checking the header has the required
    columns. A cut-off or malformed row is a FormatError naming file and line."""
    wanted = list(required)
    try:
        fh = open(path, newline="", errors="replace")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        lines = (line for line in fh if not (skip_prefix and line.startswith(skip_prefix)))
        reader = csv.DictReader(lines)
        try:
            header = reader.fieldnames or []
        except csv.Error as exc:
            raise FormatError(f"{path}: not a CSV file ({exc})") from None
        missing = [c for c in wanted if c not in header]
        if missing:
            raise FormatError(f"{path}: not the expected file: missing column(s) {', '.join(missing)} "
                              f"(header has {len(header)} columns)")
        width = len(header)
        number = 1
        try:
            for number, row in enumerate(reader, start=2):
                if None in row or len(row) != width or any(row.get(c) is None for c in wanted):
                    raise FormatError(f"{path}:{number}: truncated or malformed row")
                yield number, row
        except csv.Error as exc:
            raise FormatError(f"{path}:{number + 1}: malformed CSV ({exc})") from None


def number(path: Path, line: int, text: str | None) -> float:
    """A numeric field; thousands separators (ncu prints "10,496") are accepted."""
    try:
        value = float(str(text).replace(",", ""))
    except ValueError:
        raise FormatError(f"{path}:{line}: expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise FormatError(f"{path}:{line}: expected a finite number, got {text!r}")
    return value
