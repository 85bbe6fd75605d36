"""The live view of a running job (analysis/live.py's LiveState): a rich table for a terminal
(refreshed in place by rich Live), or one plain line for logs and for a terminal the workload's own
output shares. Every name (a rank, a host: taken from file names) is shown as data (screen.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profilectl.analysis.live import MS, LiveState, RankNow
from profilectl.screen import visible

if TYPE_CHECKING:
    from rich.console import RenderableType

LINE_RANKS = 8  # a plain line names at most this many ranks (those that lag most beyond it)
STALE_S = 10.0  # a rank whose last step ended longer ago than this is said to have stopped stepping


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / MS:.1f}"


def _gpu(rank: RankNow) -> str:
    g = rank.gpu
    if g is None:
        return ""
    busy = "-" if g.busy_pct is None else f"{g.busy_pct:.0f}%"
    power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
    return f"GPU {g.gpu} {busy} {power}"


def _age(state: LiveState, rank: RankNow) -> str:
    if rank.last_end_unix_ns is None:
        return ""
    age = (state.at_unix_ns - rank.last_end_unix_ns) / 1e9
    return f" (no step for {age:.0f} s)" if age > STALE_S else ""


def _unmapped(state: LiveState) -> list[str]:
    """The GPUs no rank is known to use, as `GPU 2 97% 410 W`."""
    used = {(r.gpu.host, r.gpu.gpu) for r in state.ranks if r.gpu is not None}
    out = []
    for g in state.gpus:
        if (g.host, g.gpu) in used:
            continue
        where = f"{visible(g.host)}:" if g.host and state.hosts > 1 else ""
        busy = "-" if g.busy_pct is None else f"{g.busy_pct:.0f}%"
        power = "-" if g.power_w is None else f"{g.power_w:.0f} W"
        out.append(f"GPU {where}{g.gpu} {busy} {power}")
    return out


def _verdict(state: LiveState, since: int | None) -> str:
    named = f" (named since step {since})" if state.straggler is not None and since is not None else ""
    return visible(state.verdict) + named


def line(state: LiveState, since: int | None = None) -> str:
    """One line: the step every rank has reached, each rank's median step and lag (and its GPU), the
    GPUs no rank maps to, then the verdict."""
    ranks = list(state.ranks)
    if len(ranks) > LINE_RANKS:
        ranks = sorted(sorted(ranks, key=lambda r: -(r.lag_ns or 0))[:LINE_RANKS], key=lambda r: state.ranks.index(r))
    parts = [f"live: step {state.common_step if state.common_step is not None else '-'}"]
    for r in ranks:
        gpu = _gpu(r)
        parts.append(f"rank {visible(r.rank)}: step {_ms(r.median_step_ns)} ms, lag {_ms(r.lag_ns)} ms"
                     + (f", {gpu}" if gpu else "") + _age(state, r))
    if len(state.ranks) > len(ranks):
        parts.append(f"{len(state.ranks) - len(ranks)} more rank(s)")
    parts += _unmapped(state)
    parts.append(_verdict(state, since))
    return " | ".join(parts)


def table(state: LiveState, title: str = "", since: int | None = None) -> "RenderableType":
    """The rich view: one row per rank, the GPUs no rank maps to, the verdict under them."""
    from rich.console import Group
    from rich.table import Table

    from profilectl.screen import text
    view = Table(title=visible(title) if title else None, title_justify="left")
    for name, justify in (("rank", "right"), ("host", "left"), ("last step", "right"), ("last steps (ms)", "left"),
                          ("median step", "right"), ("lag behind earliest", "right"), ("GPU", "left")):
        view.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in state.ranks:
        last = "-" if r.last_step is None else f"{r.last_step}{_age(state, r)}"
        view.add_row(text(r.rank), text(r.host), text(last), text(" ".join(_ms(d) for d in r.step_ns)),
                     text(f"{_ms(r.median_step_ns)} ms"), text(f"{_ms(r.lag_ns)} ms",
                                                                 "bold red" if state.straggler and
                                                                 state.straggler.rank == r.rank else ""),
                     text(_gpu(r) or "-"))
    parts: list[RenderableType] = [view]
    others = _unmapped(state)
    if others:
        parts.append(text("GPUs: " + " | ".join(others)))
    parts.append(text(_verdict(state, since), "bold red" if state.straggler else ""))
    return Group(*parts)
