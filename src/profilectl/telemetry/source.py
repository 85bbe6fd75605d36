"""A telemetry source: opened once, read once per sweep (one Reading per GPU), closed at the end.

Every metric is tried once when the source opens: one a GPU cannot give (NOT_SUPPORTED, a virtual
GPU without power readings) is left out from then on, so a later failure means the source broke
(a lost GPU, a driver reset) and the sampler stops with that reason, never the run.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from profilectl.telemetry.model import Reading

T = TypeVar("T")


class SourceError(Exception):
    """The source cannot start, or stopped working: the message says why, in one line."""


class GpuReadings:
    name = ""
    power_reading: str | None = None  # how power is read (instantaneous, or an average over a window)
    # a library reads in well under a millisecond: one more sweep when the steps end closes the
    # run's window (the last step's energy); a command would add its own run time to the run's
    final_sweep = True

    def open(self) -> None:
        """Start the source and learn what each GPU can give; SourceError when it cannot."""
        raise NotImplementedError

    def read(self) -> list[Reading]:
        """One sweep over the GPUs; SourceError when the source broke."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the library (or the command under way); never raises."""

    def cancel(self) -> None:
        """From another thread: end a read under way quickly (a command is killed)."""

    @property
    def call_seconds(self) -> float:
        """How long the last read took: command sources space their calls by it."""
        return 0.0


class Probe:
    """Which metrics work, learnt on the first sweep: a metric that fails then is never asked again;
    one that worked and fails later is the source breaking."""

    def __init__(self) -> None:
        self.unsupported: set[tuple[int, str]] = set()
        self.learning = True

    def value(self, gpu: int, metric: str, read: Callable[[], T | None], errors: tuple[type[BaseException], ...],
              describe: Callable[[BaseException], str]) -> T | None:
        if (gpu, metric) in self.unsupported:
            return None
        try:
            return read()
        except errors as exc:
            if self.learning:
                self.unsupported.add((gpu, metric))
                return None
            raise SourceError(f"{metric} of GPU {gpu}: {describe(exc)}") from None


def number(value: object) -> float | None:
    """A numeric reading, or None for the sources' "not available" markers."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None
