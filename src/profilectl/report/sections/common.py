"""Helpers shared by section builders: columns named by their unit, and the name-statistics tables
(kernels, API calls, copies, operators)."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from profilectl.model.document import Aggregate, Column, Section, Show, TableBlock
from profilectl.read.summary import KernelRow
from profilectl.model.units import heading, unit_of


def column(name: str, title: str | None = None, aggregate: Aggregate = "none", show: Show = "always") -> Column:
    """A column whose unit is the one its name carries (total_ns -> ns); its title from the name unless given."""
    return Column(name=name, title=title if title is not None else heading(name), unit=unit_of(name),  # type: ignore[arg-type]
                  aggregate=aggregate, show=show)


def table_of(key: str, records: Sequence[Any], titles: Mapping[str, str] | None = None, title: str | None = None,
             shown: int | None = None, names: Iterable[str] | None = None) -> TableBlock:
    """Dataclass records (or dicts) as a table, one column per field. Columns named in `titles` are
    shown to people under that title; the others are kept for machine formats only (when `titles`
    is given at all)."""
    rows = [r if isinstance(r, dict) else dataclasses.asdict(r) for r in records]
    fields = list(names) if names is not None else list(dict.fromkeys(k for r in rows for k in r))
    columns = tuple(column(f, (titles or {}).get(f), show="always" if titles is None or f in titles else "machine")
                    for f in fields)
    if titles:  # human columns in the order the titles give, machine ones after
        order = {name: i for i, name in enumerate(titles)}
        columns = tuple(sorted(columns, key=lambda c: order.get(c.name, len(order))))
    return TableBlock(key=key, title=title, shown=shown, columns=columns,
                      rows=tuple(tuple(r.get(c.name) for c in columns) for r in rows))


def name_stats(key: str, title: str, rows: Sequence[KernelRow]) -> Section | None:
    """A name-statistics section (kernels, API calls, copies, operators): heaviest first; min/max/std
    on wide terminals only; self time where the tool reports it (torch's Self CPU)."""
    if not rows:
        return None
    columns = [Column("name", "name"), Column("calls", "calls", "count", "sum"), Column("total_ns", "total", "ns", "sum")]
    if any(r.self_ns is not None for r in rows):
        columns.append(Column("self_ns", "self", "ns", "sum"))
    columns += [Column("mean_ns", "mean", "ns", "weighted_mean"), Column("min_ns", "min", "ns", "min", "wide"),
                Column("max_ns", "max", "ns", "max", "wide"), Column("std_ns", "std", "ns", "none", "wide"),
                Column("percent", "% time", "percent", "sum")]
    table = TableBlock(key=key, title=title, columns=tuple(columns),
                       rows=tuple(tuple(getattr(r, c.name) for c in columns) for r in rows))
    return Section(key=key, title=title, tables=(table,))
