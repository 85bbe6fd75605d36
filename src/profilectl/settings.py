"""Every PROFILECTL_* environment variable, listed once as data, and typed accessors for them.

A variable is one `Setting`: its name, its type (path, int, float, bool, str, choice), its default
(the value when it is unset or empty), what it means in one line and who reads it. profilectl reads
its variables only through the accessors below (`get_int("PROFILECTL_MAX_SNAPSHOT_BYTES")`, ...),
which turn a value that does not fit into one line, a `SettingError` (a UsageError, exit 2) naming
the variable and what it accepts, never a traceback.

Some variables are read where profilectl cannot be imported, and are listed here all the same:
- the start-up hook (backends/rank_startup/sitecustomize.py) and the tool helpers
  (backends/tool_helpers/) run inside the user's interpreter; the backends set their variables;
- the container entry point, the SLURM cluster and the example batch scripts (docker/, tools/,
  examples/) are the variables users set around profilectl.
docs/settings.md is the table of `SETTINGS` (`markdown_table()`; tests/unit/test_settings.py keeps
them equal, and checks that every PROFILECTL_ name in src/, docker/, tools/ and examples/ is here).

Standard library and profilectl.errors only: this is the bottom layer, imported from anywhere.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping, NamedTuple

from profilectl.errors import UsageError

KINDS = ("path", "int", "float", "bool", "str", "choice")
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")
NO_LIMIT = 1 << 62  # what a size bound of 0 (or less) becomes: no bound


class SettingError(UsageError):
    """A PROFILECTL_* variable whose value does not fit its type: one line naming it and what it accepts."""


class Setting(NamedTuple):
    name: str
    kind: str  # one of KINDS
    default: object  # the value when unset or empty (None: none)
    meaning: str  # one line
    readers: str  # who reads it (modules of src/profilectl, or files of docker/, tools/, examples/)
    choices: tuple[str, ...] = ()  # kind "choice": the values accepted
    minimum: float | None = None  # int/float: the smallest value accepted

    def accepts(self) -> str:
        """What the variable accepts, in words (the error message and the doc's table say it)."""
        if self.kind == "bool":
            return "1/true/yes/on or 0/false/no/off"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind in ("int", "float"):
            what = "a whole number" if self.kind == "int" else "a number"
            return what if self.minimum is None else f"{what}, {self.minimum:g} or more"
        return "a path" if self.kind == "path" else "text"


def _s(name: str, kind: str, default: object, meaning: str, readers: str, **more: object) -> Setting:
    return Setting(name, kind, default, meaning, readers, **more)  # type: ignore[arg-type]


_HOOK = "backends/rank_startup/sitecustomize.py (set by backends/base.py)"
_CLUSTER = "docker/slurm/cluster.sh, docker/slurm/compose.slurm.yml"

SETTINGS: tuple[Setting, ...] = (
    # Where things are
    _s("PROFILECTL_TRACES_DIR", "path", "traces", "the traces folder: output root of runs, and what ls/report look in",
       "runs.py, cli.py, docker/entrypoint.py, examples/slurm/profile.sbatch"),
    _s("PROFILECTL_PROFILING_DIR", "path", None, "a folder of the user's own that overrides profilectl's profiling/ data",
       "data.py, stamp.py, docker/Dockerfile"),
    _s("PROFILECTL_CACHE_DIR", "path", None, "the cache folder (else $XDG_CACHE_HOME/profilectl or ~/.cache/profilectl)",
       "cache_folder.py"),
    _s("PROFILECTL_CACHE_MAX_MB", "float", 512.0, "the bound on the cache's entries together, in MB (0: no cache)",
       "cache_folder.py", minimum=0),
    _s("PROFILECTL_PROBE_ROOT", "path", None, "probe another root file system instead of / (tests, chroots)",
       "commands.py"),
    _s("PROFILECTL_HOME", "path", "/opt/profilectl", "where the image installs profilectl (its bin/hip_matmul workload)",
       "request.py, docker/Dockerfile"),
    _s("PROFILECTL_REPO", "path", None, "the checkout with the compose suite, for `profilectl docker`", "compose.py"),
    _s("PROFILECTL_WORKLOAD", "str", None, "the program to profile when none follows `--` (a shell-quoted command line)",
       "request.py, cli.py, docker-compose.profiling.yml"),
    # Ownership and containers
    _s("PROFILECTL_HOST_UID", "int", None, "the user the outputs are handed to (the container services set it)",
       "runs.py, docker/entrypoint.py, docker-compose.profiling.yml, docker/slurm/, examples/slurm/profile.sbatch",
       minimum=0),
    _s("PROFILECTL_HOST_GID", "int", None, "the group of the outputs (default: $PROFILECTL_HOST_UID)",
       "runs.py, docker/entrypoint.py, docker-compose.profiling.yml, docker/slurm/, examples/slurm/profile.sbatch",
       minimum=0),
    _s("PROFILECTL_TRACES_ON_HOST", "path", None, "the host path of the container's traces folder, to name run folders by",
       "commands.py, docker/entrypoint.py, docker-compose.profiling.yml, docker/slurm/compose.slurm.yml"),
    _s("PROFILECTL_TRACES_HOST_DIR", "path", None, "`profilectl docker`: the host folder mounted as the traces folder",
       "compose.py, docker-compose.profiling.yml"),
    _s("PROFILECTL_APP_DIR", "path", None, "`profilectl docker`: the host folder mounted as the workload's working folder",
       "compose.py, docker-compose.profiling.yml"),
    _s("PROFILECTL_BASE_IMAGE", "str", None, "the base image the compose suite builds on",
       "compose.py, docker/Dockerfile, docker-compose.profiling.yml, docker/compose.nvidia.yml, docker/slurm/cluster.sh, "
       "tools/install-host-deps"),
    _s("PROFILECTL_BASE_BUILDER", "choice", None, "how docker/offline-base/build.sh builds the base (default: the first "
       "that works)", "docker/offline-base/build.sh", choices=("unshare", "fakechroot", "debootstrap")),
    _s("PROFILECTL_IMAGE", "str", "profilectl:local", "the project image the compose services and the SLURM nodes use",
       "docker-compose.profiling.yml, docker/slurm/"),
    _s("PROFILECTL_SERVICE", "str", None, "the profilectl command a container service runs (trace, counters, profile, ...)",
       "docker/entrypoint.py, docker-compose.profiling.yml, examples/slurm/profile.sbatch"),
    _s("PROFILECTL_SERVICE_OPTIONS", "str", None, "a container service's default profilectl options",
       "docker/entrypoint.py, docker-compose.profiling.yml"),
    _s("PROFILECTL_BIN", "str", "profilectl", "the profilectl command the container entry point runs",
       "docker/entrypoint.py"),
    _s("PROFILECTL_APP_MOUNT", "path", "/workspace/app", "the workload's folder inside the container",
       "docker/entrypoint.py"),
    # SLURM jobs
    _s("PROFILECTL_NO_JOB", "bool", False, "under SLURM, each task makes a run of its own instead of a job folder",
       "commands.py, backends/timing.py"),
    _s("PROFILECTL_JOB_SCRATCH", "bool", False, "ranks write to node-local folders, copied back later (no wait for the "
       "others)", "commands.py, examples/slurm/profile.sbatch"),
    _s("PROFILECTL_JOB_WAIT_S", "float", 15.0, "seconds a rank waits for the other ranks' folders before job.json",
       "commands.py"),
    _s("PROFILECTL_ARGS", "str", None, "more profilectl options for the example batch script",
       "examples/slurm/profile.sbatch"),
    _s("PROFILECTL_SCRATCH", "path", None, "a node-local folder the example batch script's ranks write to",
       "examples/slurm/profile.sbatch"),
    _s("PROFILECTL_CLUSTER_CALLER", "str", None, "the command line cluster.sh's messages tell to run (set by "
       "`profilectl cluster`)", "cluster.py, docker/slurm/cluster.sh"),
    _s("PROFILECTL_CLUSTER_NAME", "str", "profilectl-slurm", "the compose project name of the test SLURM cluster",
       _CLUSTER),
    _s("PROFILECTL_CLUSTER_TRACES", "path", None, "the test SLURM cluster's shared traces folder (default: traces/cluster)",
       _CLUSTER + ", docker/slurm/ddp.sbatch"),
    _s("PROFILECTL_CLUSTER_JOBS", "path", None, "a host folder mounted as the test SLURM cluster's jobs folder",
       _CLUSTER),
    _s("PROFILECTL_CLUSTER_TIMEOUT", "int", 120, "seconds cluster.sh waits for the test SLURM cluster to come up",
       "docker/slurm/cluster.sh", minimum=0),
    _s("PROFILECTL_SLURM_IMAGE", "str", "profilectl-slurm:local", "the image of the test SLURM cluster's nodes",
       _CLUSTER),
    _s("PROFILECTL_SLURM_IMAGE_REPO", "str", None, "a repository to tag the node image by its inputs' digest",
       "docker/slurm/cluster.sh"),
    _s("PROFILECTL_SLURM_KEEP_IMAGE", "bool", False, "`cluster.sh up` keeps a node image built from an older project "
       "image", "docker/slurm/cluster.sh"),
    _s("PROFILECTL_SLURM_EXTRA_PACKAGES", "str", None, "more Debian packages for the node image", _CLUSTER),
    _s("PROFILECTL_SLURM_INPUTS", "str", None, "the digest of the node image's inputs (set by cluster.sh)", _CLUSTER),
    # Running
    _s("PROFILECTL_REPEAT_BUDGET_S", "float", 10.0, "the time budget of the timing backend's sized repeats, in seconds (0 or less: the default)",
       "backends/timing.py"),
    _s("PROFILECTL_FOLDER_WAIT_S", "float", 30.0, "seconds without progress before the traces folder counts as stalled "
       "(0 or less: the default)", "runner.py"),
    _s("PROFILECTL_OUTPUT_WAIT_S", "float", 10.0, "seconds a finished run's output waits for a reader that stopped "
       "reading", "console.py"),
    _s("PROFILECTL_STEP", "str", None, "a token in every step process's environment (set by the runner)", "runner.py"),
    # Reading files
    _s("PROFILECTL_MAX_SNAPSHOT_BYTES", "int", 2 << 30, "the largest torch memory snapshot read (0: no bound)",
       "formats/torch_memory.py"),
    _s("PROFILECTL_MAX_INSPECTOR_BYTES", "int", 4 << 30, "the largest NCCL inspector file read, inflated (0: no bound)",
       "formats/nccl_inspector.py"),
    _s("PROFILECTL_MAX_PARTIAL_BYTES", "int", 4 << 30, "the largest partial.json read (0: no bound)",
       "read/partials.py"),
    _s("PROFILECTL_MAX_INFLATE_RATIO", "int", 100, "a .json.gz trace inflating beyond this many times its size is "
       "refused (0: no bound)", "formats/chrome_io.py"),
    _s("PROFILECTL_MAX_INFLATED_BYTES", "int", 256 << 30, "the most bytes a .json.gz trace may inflate to (0: no bound)",
       "formats/chrome_io.py"),
    _s("PROFILECTL_MAX_EVENT_BYTES", "int", 256 << 20, "the largest single event of a Chrome trace (0: no bound)",
       "formats/chrome_io.py, formats/chrome_raw.py"),
    _s("PROFILECTL_NO_PARALLEL", "bool", False, "read large traces and many files in one process",
       "formats/reader.py, formats/chrome_parallel.py"),
    _s("PROFILECTL_NO_ISAL", "bool", False, "inflate .gz traces with zlib, not isal", "formats/chrome_io.py"),
    _s("PROFILECTL_NO_ARROW", "bool", False, "read rocpd databases through sqlite3 rows, not connectorx/Arrow",
       "formats/rocpd.py"),
    # query
    _s("PROFILECTL_QUERY_TIMEOUT_S", "float", 300.0, "`query`: stop the statement after this many seconds (0: no bound)",
       "report/query.py", minimum=0),
    _s("PROFILECTL_QUERY_MEMORY_MB", "float", 1024.0, "`query`: SQLite's memory budget in MiB (0: no bound)",
       "report/query.py", minimum=0),
    # The start-up hook in the workload's ranks (set by the backends)
    _s("PROFILECTL_TORCH_OUT", "path", None, "the hook runs torch.profiler and writes a Chrome trace per rank here",
       _HOOK),
    _s("PROFILECTL_TORCH_OPTIONS", "str", None, "torch.profiler's switches and window, as JSON",
       _HOOK + ", backends/torch_profiler.py"),
    _s("PROFILECTL_STATUS_OUT", "path", None, "where each rank writes its status file when only steps are timed",
       _HOOK + ", plan.py, backends/timing.py"),
    _s("PROFILECTL_STEPS", "str", None, "the step window A:B the hook profiles", _HOOK),
    _s("PROFILECTL_STEP_ACTION", "choice", "torch", "what the step or range window drives", _HOOK,
       choices=("torch", "torch-range", "cuda-profiler", "roctx", "nvtx")),
    _s("PROFILECTL_RANGE", "str", None, "the record_function range that opens the window instead of steps", _HOOK),
    _s("PROFILECTL_NVTX_STEPS", "str", "profilectl.steps", "the NVTX range the hook opens over the step window",
       _HOOK + ", backends/nsys.py"),
    _s("PROFILECTL_RANK_ENV", "str", None, "the variables (comma-separated) that carry a rank's number", _HOOK + ", plan.py"),
    _s("PROFILECTL_LOCAL_RANK_ENV", "str", None, "the variables (comma-separated) that carry a rank's local number",
       _HOOK),
    _s("PROFILECTL_SINGLE", "bool", False, "the one process is rank 0 (a plain `python train.py`)", _HOOK),
    _s("PROFILECTL_PROFILED", "str", None, "the pid of the profiled process: its children are not profiled again "
       "(set by the hook)", "backends/rank_startup/sitecustomize.py"),
    _s("PROFILECTL_HOOK_DEBUG", "bool", False, "the hook says what it decides, on stderr",
       "backends/rank_startup/sitecustomize.py"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The Setting of `name`; KeyError for a name not listed (a programming error, not the user's)."""
    return BY_NAME[name]


def raw(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The variable's text, None when it is unset or empty (blank)."""
    setting(name)
    text = (os.environ if env is None else env).get(name)
    return text if text is not None and text.strip() else None


def _bad(s: Setting, text: str) -> SettingError:
    return SettingError(f"${s.name}={text!r}: not {s.accepts()} ({s.meaning})")


def _parse(s: Setting, text: str) -> object:
    if s.kind == "bool":
        word = text.strip().lower()
        if word in TRUE or word in FALSE:
            return word in TRUE
        raise _bad(s, text)
    if s.kind == "choice":
        if text in s.choices:
            return text
        raise _bad(s, text)
    if s.kind in ("int", "float"):
        try:
            number: float = int(text) if s.kind == "int" else float(text)
        except ValueError:
            raise _bad(s, text) from None
        if not math.isfinite(number) or (s.minimum is not None and number < s.minimum):
            raise _bad(s, text)
        return number
    return Path(text) if s.kind == "path" else text


def get(name: str, env: Mapping[str, str] | None = None) -> object:
    """The variable's value, typed, or its default when unset or empty; SettingError when it does not fit."""
    s = setting(name)
    text = raw(name, env)
    if text is None:
        return Path(s.default) if s.kind == "path" and isinstance(s.default, str) else s.default
    return _parse(s, text)


# numpy's own variable, checked like a setting but not one of profilectl's (not in SETTINGS or its doc)
NUMPY_HUGE_PAGES = Setting("NUMPY_MADVISE_HUGEPAGE", "int", None, "numpy's huge-page hint: 0 off, 1 on; unset: "
                           "numpy's default", "formats/reader.py")


def check_environment(env: Mapping[str, str] | None = None) -> None:
    """Every listed setting that is set parses, else SettingError naming the first that does not: a
    mistyped value ends the command at its start, not only where a path that happens to read it runs
    (PROFILECTL_NO_PARALLEL=maybe passed unseen by every report too small to read in parallel)."""
    for s in SETTINGS:
        get(s.name, env)
    # numpy's own switch, which reading leaves alone where set (formats/reader.py): numpy parses it
    # when it is imported, and a value that is not a whole number stops that import with a traceback
    hint = (os.environ if env is None else env).get(NUMPY_HUGE_PAGES.name)
    if hint is not None:
        _parse(NUMPY_HUGE_PAGES, hint)


def _typed(name: str, kind: tuple[str, ...]) -> None:
    if setting(name).kind not in kind:
        raise TypeError(f"{name} is a {setting(name).kind} setting, not {'/'.join(kind)}")


def get_int(name: str, env: Mapping[str, str] | None = None) -> int | None:
    _typed(name, ("int",))
    value = get(name, env)
    return None if value is None else int(value)  # type: ignore[call-overload]


def get_float(name: str, env: Mapping[str, str] | None = None) -> float | None:
    _typed(name, ("float",))
    value = get(name, env)
    return None if value is None else float(value)  # type: ignore[arg-type]


def get_bool(name: str, env: Mapping[str, str] | None = None) -> bool:
    _typed(name, ("bool",))
    return bool(get(name, env))


def get_path(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    _typed(name, ("path",))
    value = get(name, env)
    return value if isinstance(value, Path) else None


def get_str(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """Text (a str or choice setting) as given, or the default."""
    _typed(name, ("str", "choice"))
    value = get(name, env)
    return None if value is None else str(value)


def get_limit(name: str, env: Mapping[str, str] | None = None) -> int:
    """A bound on hostile or broken input (an int setting): 0 or less lifts it."""
    value = get_int(name, env)
    return NO_LIMIT if value is None or value <= 0 else value


def get_float_or_default(name: str, env: Mapping[str, str] | None = None) -> float:
    """A float setting read where no error can be said (a run's teardown, the last output of a
    finished run): a value that does not fit gives the default. The command's start has already
    refused such a value (check_environment); this is for an environment changed since."""
    try:
        value = get_float(name, env)
    except SettingError:
        value = None
    return float(setting(name).default if value is None else value)  # type: ignore[arg-type]


def markdown_table() -> str:
    """docs/settings.md's table, from SETTINGS."""
    lines = ["| variable | type | default | accepts | meaning | read by |", "| --- | --- | --- | --- | --- | --- |"]
    for s in SETTINGS:
        default = "" if s.default is None else f"`{s.default}`"
        cells = (f"`{s.name}`", s.kind, default, s.accepts(), s.meaning, s.readers)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


DOC_HEAD = """# Settings: the PROFILECTL_* environment variables

Every environment variable profilectl, its container services, its start-up hook and its scripts
read, as listed once in `src/profilectl/settings.py` (`SETTINGS`). This file is made from that list
(`python -m profilectl.settings > docs/settings.md`); tests/unit/test_settings.py fails when the two
differ, or when a PROFILECTL_ name in src/, docker/, tools/ or examples/ is not in the list.

A variable that is unset or empty has its default. profilectl reads its own through typed accessors
(`settings.get_int(NAME)`, `get_float`, `get_bool`, `get_path`, `get_str`): a value that does not
fit is one line naming the variable and what it accepts (exit 2), never a traceback. A bool accepts
1/true/yes/on and 0/false/no/off. The variables of the start-up hook (backends/rank_startup/) are set
by the backends and read inside the workload's own interpreter, where profilectl is not importable;
those of docker/, tools/ and examples/ are read by those scripts.

"""


def document() -> str:
    """docs/settings.md, whole."""
    return DOC_HEAD + markdown_table()


if __name__ == "__main__":
    import sys
    sys.stdout.write(document())
