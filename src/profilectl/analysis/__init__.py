"""Analyses over what the readers found: the timeline (idle, overlap, launch-bound, steps), the
diagnosis, stragglers, roofline. Importing the package registers its timeline sink with the model
(model/timeline.py sink()), through which readers hand over their timelines as they read them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from profilectl.model import timeline as _model

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


class _Sink:
    """The analyses readers may feed while they parse: a rank's streaming figures, and a rank's
    reduction (its timeline reduced to what the job's analyses need)."""

    def feed(self, api_start: "NDArray[np.int64]", api_end: "NDArray[np.int64]",
             api_correlation: "NDArray[np.int64]", capacity: int, kind: int) -> _model.TimelineFeed:
        from profilectl.analysis.idle import HtaStream
        from profilectl.analysis.rank_stream import RankStream, StartOrderFeed
        rank_stream = RankStream((), api_start, api_end, api_correlation, capacity=capacity)
        # HTA's breakdown looks launch calls up in RankStream's copy sorted by correlation id
        return StartOrderFeed(rank_stream, HtaStream(rank_stream.api[:2] if rank_stream.api else None), kind)

    def reduce(self, timelines: Sequence[_model.RankTimeline]) -> tuple[Any, ...]:
        from profilectl.analysis.reduce import reduce_timelines
        return reduce_timelines(timelines)

    def collective_overlap(self, calls: Sequence[Any], timeline: _model.RankTimeline) -> tuple[Any, ...]:
        from profilectl.analysis.collective_calls import compute_overlap
        return compute_overlap(calls, timeline)


_model.register_sink(_Sink())
