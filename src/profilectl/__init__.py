"""profilectl: probe the machine, pick the profiler that works, keep every output.

The Python API (profilectl/api.py, loaded on first use so `import profilectl` stays cheap):
`profilectl.open(path)`, `profilectl.compare(a, b)`, `profilectl.run(service, args)`.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers read it as True
if TYPE_CHECKING:
    from profilectl.api import API_VERSION, Compared, Run, RunResult, compare, open, run  # noqa: F401

_API = ("open", "compare", "run", "Run", "Compared", "RunResult", "API_VERSION")


def __getattr__(name: str) -> object:  # no typing import: `import profilectl` stays bare
    if name in _API:
        from profilectl import api
        return getattr(api, name)
    raise AttributeError(f"module 'profilectl' has no attribute {name!r}")


def step() -> None:
    """Mark the end of a step in a loop without an optimizer (inference, custom training), so that
    `--steps A:B` and the per-step breakdown see it. A no-op unless profilectl is profiling this
    process (its start-up hook installs the real marker)."""
    import builtins
    marker = getattr(builtins, "_profilectl_step", None)
    if marker is not None:
        marker()
