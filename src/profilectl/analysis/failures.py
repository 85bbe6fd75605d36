"""Failures in order: for a multi-rank failure, which rank failed first, when, and its error line;
which ranks failed after it (often because of it: a peer's connection closed) and which ones the
launcher stopped. From the ranks' status files (profilectl's start-up hook writes the wall-clock
time of the exception or signal), so ranks of one host compare exactly and ranks of several hosts
within their clocks' agreement (NTP: milliseconds)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Protocol, Sequence


class _RankLike(Protocol):
    @property
    def rank(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def status(self) -> str | None: ...
    @property
    def failed_unix_ns(self) -> int | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def signal(self) -> int | None: ...


@dataclass(frozen=True)
class RankFailure:
    """One rank that did not end well: when (from its status file), how long after the first failure, whether it
    failed or was stopped, and its error."""
    rank: str
    host: str | None
    at_unix_ns: int | None  # None: the rank's status file has no time (an older hook, or no file)
    after_first_ns: int | None  # how long after the first failure
    how: str  # "failed" (an exception or a non-zero exit) or "stopped" (a signal from the launcher)
    error: str | None  # the exception line, or "signal 15"


@dataclass(frozen=True)
class FailureOrder:
    """A multi-rank failure in order: the rank that failed first, the later failures, and those the launcher stopped."""
    first: RankFailure
    later: tuple[RankFailure, ...] = ()  # failed afterwards, in order
    stopped: tuple[RankFailure, ...] = ()  # stopped by the launcher (signal)


def _label(failure: RankFailure) -> str:
    return f"rank {failure.rank}" + (f" ({failure.host})" if failure.host else "")


def order(ranks: Sequence[_RankLike]) -> FailureOrder | None:
    failures = []
    for r in ranks:
        if not r.status or r.status == "ok":
            continue
        by_signal = r.signal is not None and not r.error
        failures.append(RankFailure(rank=r.rank, host=r.host, at_unix_ns=r.failed_unix_ns, after_first_ns=None,
                                    how="stopped" if by_signal else "failed",
                                    error=r.error or (f"signal {r.signal}" if r.signal else r.status)))
    if not failures:
        return None
    timed = sorted((f for f in failures if f.at_unix_ns is not None and f.how == "failed"),
                   key=lambda f: f.at_unix_ns or 0)
    first = timed[0] if timed else next((f for f in failures if f.how == "failed"), failures[0])
    origin = first.at_unix_ns

    def relative(f: RankFailure) -> RankFailure:
        after = f.at_unix_ns - origin if f.at_unix_ns is not None and origin is not None else None
        return RankFailure(f.rank, f.host, f.at_unix_ns, after, f.how, f.error)
    later = [relative(f) for f in timed[1:]] + [f for f in failures if f.how == "failed" and f.at_unix_ns is None
                                                 and f is not first]
    stopped = [relative(f) for f in failures if f.how == "stopped" and f is not first]
    return FailureOrder(first=relative(first), later=tuple(later), stopped=tuple(stopped))


def sentence(found: FailureOrder, first_words: str = "failed first") -> str:
    """One line: who failed first, when, with what; then the others."""
    first = found.first
    when = ""
    if first.at_unix_ns is not None:
        stamp = datetime.datetime.fromtimestamp(first.at_unix_ns / 1e9, tz=datetime.timezone.utc)
        when = f" at {stamp.strftime('%H:%M:%S.%f')[:-3]} UTC"
    verb = "was stopped first" if first.how == "stopped" else first_words
    text = f"{_label(first)} {verb}{when}: {first.error}"
    if found.later:
        text += "; then " + ", ".join(
            f"{_label(f)}" + (f" {f.after_first_ns / 1e9:.3f} s later" if f.after_first_ns is not None else "")
            + f" ({f.error})" for f in found.later)
    if found.stopped:
        text += "; stopped by the launcher afterwards: " + ", ".join(
            _label(f) + (f" ({f.error}, {f.after_first_ns / 1e9:.3f} s later)" if f.after_first_ns is not None
                         else f" ({f.error})") for f in found.stopped)
    return text
