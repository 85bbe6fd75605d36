"""profilectl: probe the machine, pick the profiler that works, keep every output."""

__version__ = "0.1.0"
