"""A rank's timeline reduced to what the job's analyses need of it, and those reductions merged.

`reduce_timelines` runs where the rank's raw files are (at the end of its run, or on its node
under `report --on-cluster`); `merge` gives the job's timeline, idle breakdown and straggler from
the reductions alone, the same numbers `analysis.timeline.analyse` and `analysis.diagnosis.diagnose`
give from every rank's events (both go through the same per-rank functions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from profilectl.analysis import idle as idle_module
from profilectl.analysis import stragglers as stragglers_module
from profilectl.analysis.idle import RankIdle
from profilectl.analysis.stragglers import RankWaits, StragglerAnalysis
from profilectl.model.timeline import RankTimeline, TimelineAnalysis, combine
from profilectl.analysis.timeline import RankPiece, analyse_pieces, rank_order, rank_piece


@dataclass(frozen=True)
class RankReduction:
    """One process's timeline, reduced: its timeline piece, idle breakdown and waits."""
    piece: RankPiece
    idle: RankIdle
    waits: RankWaits | None  # None: no step marks

    @property
    def order(self) -> tuple[int, str, str]:
        return rank_order(self.piece.row.rank, self.piece.row.host)


def reduce_timelines(parts: Sequence[RankTimeline]) -> tuple[RankReduction, ...]:
    """Per (rank, host) of the parts, in rank order."""
    timelines = [t for t in combine(parts) if not t.empty]
    timelines.sort(key=lambda t: rank_order(t.rank, t.host))
    out = []
    for t in timelines:
        piece = rank_piece(t)
        rank_idle = idle_module.analyse_rank(t)
        out.append(RankReduction(piece=piece, idle=rank_idle, waits=stragglers_module.rank_waits(t, rank_idle)))
    return tuple(out)


def merge(reductions: Sequence[RankReduction]) -> tuple[TimelineAnalysis | None, tuple[RankIdle, ...],
                                                       StragglerAnalysis | None]:
    """The job's timeline, its ranks' idle breakdowns and the straggler analysis."""
    ordered = sorted(reductions, key=lambda r: r.order)
    timeline = analyse_pieces([r.piece for r in ordered])
    idle = tuple(r.idle for r in ordered)
    stragglers = stragglers_module.judge([r.waits for r in ordered]) if len(idle) > 1 else None
    return timeline, idle, stragglers
