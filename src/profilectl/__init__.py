"""profilectl: probe the machine, pick the profiler that works, keep every output."""

__version__ = "0.1.0"


def step() -> None:
    """Mark the end of a step in a loop without an optimizer (inference, custom training), so that
    `--steps A:B` and the per-step breakdown see it. A no-op unless profilectl is profiling this
    process (its start-up hook installs the real marker)."""
    import builtins
    marker = getattr(builtins, "_profilectl_step", None)
    if marker is not None:
        marker()
