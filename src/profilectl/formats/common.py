from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from profilectl.errors import UsageError


class FormatError(UsageError):
    """A profiler file that cannot be read: one line naming the file (and line)."""


@dataclass
class KernelStats:
    """Running statistics (Welford), so aggregation needs constant memory per kernel name."""
    calls: int = 0
    total: float = 0.0
    mean: float = 0.0
    m2: float = 0.0
    minimum: float = math.inf
    maximum: float = 0.0

    def add(self, value: float) -> None:
        self.calls += 1
        self.total += value
        delta = value - self.mean
        self.mean += delta / self.calls
        self.m2 += delta * (value - self.mean)
        self.minimum = min(self.minimum, value)
        self.maximum = max(self.maximum, value)

    @classmethod
    def from_sums(cls, count: int, total: float, total_sq: float, minimum: float, maximum: float) -> "KernelStats":
        """From SQL aggregates (count, sum, sum of squares, min, max)."""
        mean = total / count if count else 0.0
        return cls(calls=count, total=total, mean=mean, m2=max(total_sq - total * mean, 0.0),
                   minimum=minimum, maximum=maximum)

    def merge(self, other: "KernelStats") -> None:
        """Combine two partial aggregates exactly (Chan et al.): files, ranks and passes merge."""
        if other.calls == 0:
            return
        if self.calls == 0:
            self.__dict__.update(other.__dict__)
            return
        calls = self.calls + other.calls
        delta = other.mean - self.mean
        self.m2 += other.m2 + delta * delta * self.calls * other.calls / calls
        self.mean += delta * other.calls / calls
        self.calls, self.total = calls, self.total + other.total
        self.minimum, self.maximum = min(self.minimum, other.minimum), max(self.maximum, other.maximum)

    @property
    def std(self) -> float:
        return math.sqrt(self.m2 / self.calls) if self.calls > 1 else 0.0


def kernel_rows(stats: dict[str, KernelStats], unit: str = "ns") -> list[dict]:
    grand = sum(s.total for s in stats.values()) or 1.0
    rows = [{"name": name, "calls": s.calls, f"total_{unit}": s.total, f"mean_{unit}": s.mean,
             f"min_{unit}": s.minimum, f"max_{unit}": s.maximum, f"std_{unit}": s.std,
             "percent": 100.0 * s.total / grand} for name, s in stats.items()]
    rows.sort(key=lambda r: r[f"total_{unit}"], reverse=True)
    return rows


def aggregate_kernels(records: Iterable[tuple[str, float]]) -> list[dict]:
    stats: dict[str, KernelStats] = {}
    for name, duration in records:
        stats.setdefault(name, KernelStats()).add(duration)
    return kernel_rows(stats)


def read_json(path: Path):
    """A JSON file, or a one-line FormatError naming the file (and the line where it breaks)."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}:{exc.lineno}: not valid JSON (truncated?): {exc.msg}") from None


def csv_header(path: Path) -> list[str]:
    try:
        with open(path, newline="", errors="replace") as fh:
            return next(csv.reader(fh), [])
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None


def read_csv(path: Path, required: Iterable[str], skip_prefix: str | None = None) -> Iterator[tuple[int, dict]]:
    """Rows of a CSV file as dicts, checking the header has the required columns."""
    required = list(required)
    try:
        fh = open(path, newline="", errors="replace")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        lines = (line for line in fh if not (skip_prefix and line.startswith(skip_prefix)))
        reader = csv.DictReader(lines)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise FormatError(f"{path}: not the expected file: missing column(s) {', '.join(missing)} "
                              f"(header has {len(header)} columns)")
        width = len(header)
        for number, row in enumerate(reader, start=2):
            if None in row or len(row) != width or any(row.get(c) is None for c in required):
                raise FormatError(f"{path}:{number}: truncated or malformed row")
            yield number, row


def number(path: Path, line: int, text: str | None) -> float:
    """A numeric field; thousands separators (ncu prints "10,496") are accepted."""
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        raise FormatError(f"{path}:{line}: expected a number, got {text!r}") from None
