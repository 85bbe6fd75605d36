"""Command-line parsing only: each command maps to one function in commands.py.

Every error a user can cause ends as one line on stderr and a distinct exit code (errors.py);
tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import gc
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn

from profilectl import __version__, commands, errors, settings

if TYPE_CHECKING:
    from profilectl.measuring import RunOptions

DOCKER_USAGE = "profilectl docker [--vendor {auto,amd,nvidia,none}] [--build] SERVICE [ARGS ...]"
DOCKER_FORMS = """

After SERVICE, the same forms as `docker compose -f docker-compose.profiling.yml run --rm SERVICE ...`:
  profilectl docker profile                               the service's default command
  profilectl docker profile --repeat 2 -- ./app           the service's options, then the workload
  profilectl docker trace -- python3 train.py             a workload
  profilectl docker trace python3 train.py                a program without --
  profilectl docker env-check --json                      env-check's own options
  profilectl docker counters counters --set memory_bound -- ./app
                                                          a profilectl command line, run as written
"""
BACKEND_HELP = "force one backend (rocprofv3, rocprof, ncu, torch, nsys, timing) instead of the best available"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2 (argparse prints the whole usage)
        self.exit(errors.USAGE, f"{self.prog}: error: {message}{_did_you_mean(message)} (see {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, with "did you mean" for a mistyped option (`--fromat`: `--format`), named
        against the options of the command it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(parsed, "command", None)
            chosen = _subparser(self, command) if command else self
            options = [o for action in chosen._actions for o in action.option_strings]
            hints = [f"{close[0]} for {word.split('=', 1)[0]}" for word in extras if word.startswith("-")
                     for close in [difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)] if close]
            chosen.error(f"unrecognized arguments: {' '.join(extras)}" + (f"; did you mean {', '.join(hints)}?"
                                                                           if hints else ""))
        return parsed


def _did_you_mean(message: str) -> str:
    """argparse's "invalid choice: 'htm' (choose from 'table', 'html', ...)": the closest choice."""
    found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not found:
        return ""
    choices = re.findall(r"'([^']*)'", found.group(2))
    close = difflib.get_close_matches(found.group(1), choices, n=1, cutoff=0.5)
    return f"; did you mean {close[0]}?" if close else ""


def _repeat(text: str) -> int | None:
    """--repeat N (at least 1) or auto (None: sized to the workload)."""
    if text.strip().lower() == "auto":
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a number of runs (1 or more) or auto, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (`nan` and `inf` would disable the timeout)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _measuring(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--backend", metavar="NAME", help=BACKEND_HELP)  # checked against the registry by the plan
    p.add_argument("--dry-run", action="store_true", help="print the plan and exact argv; run nothing")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="stop the run (process group) after this long")
    p.add_argument("--json", action="store_true", help="print the result as JSON (workload output goes to stderr)")
    p.add_argument("--traces-dir", metavar="DIR", help="output root (default: $PROFILECTL_TRACES_DIR or ./traces)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="set/override an environment variable")
    p.add_argument("--serialize", action="store_true",
                   help="HIP_LAUNCH_BLOCKING=1 / CUDA_LAUNCH_BLOCKING=1 (changes what is measured)")
    p.add_argument("--no-redact", action="store_true",
                   help="write the workload's arguments and environment as given: by default values that look like "
                        "secrets (--password, --token, --api-key, *TOKEN*, *_SECRET*, user:pass@ URLs; the rule: "
                        "profiling/redaction.yaml) are written as <redacted>")
    p.add_argument("--as-root", action="store_true",
                   help="root only: run the profiler and the workload as root, knowingly, when root profiles another "
                        "user's program and the counters need a capability inside it (by default profilectl runs it "
                        "as that user and never hands it root's capabilities; docs/threat-model.md)")
    p.add_argument("--no-sample", action="store_true",
                   help="do not sample GPU power, memory, clocks, temperature, utilisation (telemetry.csv)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="do not echo the workload's output (it is kept in the run's stdout.log and stderr.log; a "
                        "failed run shows the last lines of stderr.log)")
    p.add_argument("workload", nargs=argparse.REMAINDER,
                   help="the program to profile, after -- (default: $PROFILECTL_WORKLOAD or the built-in matmul)")
    return p


def _bounds(p: argparse.ArgumentParser) -> None:
    """Bounded profiling: one vocabulary, translated to each backend's own flags (see --dry-run)."""
    group = p.add_argument_group("bounded profiling (translated to the backend's flags; a backend that cannot "
                                 "honour one refuses with exit 2)")
    group.add_argument("--kernel", metavar="REGEX", help="profile only kernels whose name matches")
    group.add_argument("--exclude-kernel", metavar="REGEX", help="leave out kernels whose name matches")
    group.add_argument("--launch-skip", type=int, metavar="N", help="skip the first N launches (see --dry-run: "
                       "per kernel for rocprofv3, in total for ncu)")
    group.add_argument("--launch-count", type=int, metavar="N", help="profile at most N launches after the skip")
    group.add_argument("--steps", metavar="A:B", help="profile training steps A to B-1 of a PyTorch workload "
                       "(a step ends at each optimizer.step() or profilectl.step()); `all`: every step "
                       "(torch.profiler's trace records the first 5 steps by default)")
    group.add_argument("--range", dest="nvtx_range", metavar="NAME", help="profile inside ranges of this name: NVTX "
                       "ranges (Nsight Compute; Nsight Systems: from the first such range to its end); "
                       "record_function ranges of a PyTorch workload (torch.profiler: one trace per range; "
                       "rocprofv3 7.0+: --selected-regions)")
    group.add_argument("--profiler-args", metavar="ARGS", help="extra profiler options, appended as written")


def _live(p: argparse.ArgumentParser) -> None:
    p.add_argument("--live", action="store_true",
                   help="while the job runs: per rank its last steps' times and how far its step ends lag the "
                        "earliest rank's, GPU busy and power, and the rank the others wait for, about every second "
                        "on stderr and into live.jsonl in the run directory (`profilectl watch RUN` from another "
                        "terminal shows the same)")


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a process id, got {text!r}")
    return int(text)


def _attach_and_ranks(p: argparse.ArgumentParser) -> None:
    """Attach to a running process (rocprofv3, ROCm 7.1+) and rank selection (rocprofv3)."""
    p.add_argument("--attach", type=_pid, metavar="PID",
                   help="profile this running process instead of starting a workload (rocprofv3 from ROCm 7.1; "
                        "the process must have started with ROCP_TOOL_ATTACH=1)")
    p.add_argument("--duration", type=_seconds, metavar="SECONDS",
                   help="with --attach: detach after this long (default: at Ctrl-C, --timeout or the target's end)")
    p.add_argument("--ranks", metavar="LIST", help="profile only these ranks of an mpirun/srun job, e.g. 0-3,8")


COMMANDS = ("env-check", "profile", "counters", "trace", "ls", "report", "query", "compare", "docker", "cluster",
            "merge-trace", "watch")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only`, every command is listed but only that one's options are
    built (argparse spends most of its start-up on options: ~5x less for one command)."""
    parser = _Parser(prog="profilectl", description="Probe the machine, pick the profiler that works, keep every output.")
    parser.add_argument("--version", action="version", version=f"profilectl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help_text: str, options: Callable[[argparse.ArgumentParser], object] | None = None,
                **more: Any) -> argparse.ArgumentParser | None:
        """A command's parser with `options` added, or None when its options are not needed (`only`
        names another)."""
        made = sub.add_parser(name, help=help_text, description=more.pop("description", help_text), **more)
        if only not in (None, name):
            return None
        if options is not None:
            options(made)
        return made

    command("env-check", "what can be measured here, what cannot, why, and the fix", _env_check_options)
    profile_help = "time the workload (and torch.profiler tables for PyTorch); always available"
    if (profile := command("profile", profile_help)):
        _measuring(profile)
        profile.add_argument("--repeat", type=_repeat, default=None, metavar="N|auto",
                             help="timed runs (default auto: sized to the workload after a first run, about 10 s "
                                  "of runs, 3 to 30; a first run over 3.3 s is the only one)")
        profile.add_argument("--warmup", type=int, default=None, metavar="N",
                             help="untimed warm-up runs (default 1: with --repeat auto, the run that sizes it)")
        profile.add_argument("--torch-pass", choices=("auto", "always", "never"), default="auto",
                             help="the extra torch.profiler run of a PyTorch workload (operator tables): auto "
                                  "(default) when one more run costs at most 25%% of the timed runs, always, never")
        _live(profile)
    if (counters := command("counters", "hardware counters per kernel (rocprofv3, rocprof, ncu)")):
        _counters_options(_measuring(counters))
    if (trace := command("trace", "a Perfetto-ready trace and top-kernels table")):
        _trace_options(_measuring(trace))
        _live(trace)
    command("ls", "the runs in a traces folder, newest first", _ls_options)
    command("report", "read a run, or any folder/file rocprofv3, rocprof, ncu or torch.profiler wrote", _report_options)
    command("query", "SQL (SQLite) over the report's tables of a run, job or output folder", _query_options)
    command("compare", "two runs kernel by kernel: time, calls, speedup", _compare_options)
    docker_help = "run a compose service from the host (builds the image if missing)"
    command("docker", docker_help, _docker_options_of, usage=DOCKER_USAGE, description=docker_help + DOCKER_FORMS,
            formatter_class=argparse.RawDescriptionHelpFormatter)
    command("cluster", "the SLURM test cluster of docker/slurm: up, down, status, exec -- CMD", _cluster_options)
    command("merge-trace", "one Perfetto/Chrome trace of a multi-rank job: a process track per rank, clocks aligned",
            _merge_trace_options)
    command("watch", "a run in progress (another terminal, a cluster's shared folder): per rank its last steps, "
            "their lag, GPU busy and power, and the straggler, until the run ends", _watch_options)
    return parser


def _watch_options(watch: argparse.ArgumentParser) -> None:
    watch.add_argument("path", metavar="RUN", help="a run directory (or a SLURM job folder) being written; nothing "
                       "is written into it")
    watch.add_argument("--interval", type=_seconds, default=1.0, metavar="SECONDS",
                       help="how often to read on (default 1)")


def _merge_trace_options(merge: argparse.ArgumentParser) -> None:
    merge.add_argument("path", metavar="PATH", help="a SLURM job folder, a run directory, or a folder of per-rank "
                       "torch.profiler traces (<host>-rank<R>-<pid>.pt.trace.json[.gz]) or rocprofv3 outputs "
                       "(<host>/rank<R>-<pid>_kernel_trace.csv, <host>/<pid>_*)")
    merge.add_argument("--output", "-o", metavar="FILE", help="the merged trace (gzip when it ends in .gz; default "
                       "./<PATH's name>.merged.trace.json.gz)")
    merge.add_argument("--steps", metavar="A:B", help="only ProfilerStep#A to #B-1 of every rank (default: "
                       "the whole traces)")
    merge.add_argument("--max-mb", type=float, default=100, metavar="N",
                       help="at most N MB of JSON (default 100, which Perfetto UI opens comfortably): flow arrows, "
                            "then the shortest CPU-side events, then the shortest GPU events are dropped, and said")
    merge.add_argument("--force", action="store_true", help="let -o replace an existing file")
    merge.add_argument("--json", action="store_true", help="print what was merged (offsets, drops) as JSON")


def _env_check_options(env: argparse.ArgumentParser) -> None:
    env.add_argument("--json", action="store_true", help="the EnvReport as JSON (stable keys: docs/contracts.md)")
    env.add_argument("--deep", action="store_true", help="also run the real profiler once to test counters live")
    env.add_argument("--require", choices=sorted(commands.REQUIRE_CHOICES), help="exit 3 if this capability is unavailable")
    env.add_argument("--root", metavar="DIR", help="probe this root file system instead of / (tests, chroots)")
    env.add_argument("--path", metavar="PATH", help="search profilers on this PATH instead of $PATH")


def _counters_options(counters: argparse.ArgumentParser) -> None:
    counters.add_argument("--set", dest="counter_set", default="basic", metavar="NAME|FILE",
                          help="counter set name from profiling/counters, or a YAML / pmc: text file")
    counters.add_argument("--fallback", action="store_true", help="run `profile` when counters are unavailable here")
    counters.add_argument("--clock-control", choices=("base", "none"), default="base",
                          help="Nsight Compute: lock clocks to base during replay (default, as ncu does: repeatable "
                               "values, kernels run longer than in a trace) or leave them to the GPU")

    _bounds(counters)
    _attach_and_ranks(counters)
    counters.add_argument("--include-collectives", action="store_true",
                          help="replay NCCL/RCCL kernels too (excluded by default: replaying a collective waits "
                               "for the other ranks and can hang the job)")


def _trace_options(trace: argparse.ArgumentParser) -> None:
    _bounds(trace)
    _attach_and_ranks(trace)
    trace.add_argument("--preset", default="lightweight", metavar="NAME",
                       help="lightweight (default), api, memory, communication, sys, pc-sampling")
    trace.add_argument("--shapes", action="store_true", help="torch.profiler records each operator's input shapes "
                       "(record_shapes): the report puts the operators on the roofline, no counters needed")
    trace.add_argument("--memory", action="store_true", help="torch's CUDA memory history: a snapshot at exit (and "
                       "at an out-of-memory error) that the report reads: the peak and what held it, allocated "
                       "against reserved over time")


def _ls_options(ls: argparse.ArgumentParser) -> None:
    ls.add_argument("traces_dir", nargs="?", metavar="TRACES_DIR",
                    help="the traces folder to list (default: $PROFILECTL_TRACES_DIR or ./traces)")
    ls.add_argument("--json", action="store_true", help="one JSON object per run (run id, service, status, times)")


def _report_options(report: argparse.ArgumentParser) -> None:
    report.add_argument("path", metavar="PATH", help="a run directory, a SLURM job folder, or a profiler's own "
                        "folder or file (CSV, rocpd .db, JSON, .ncu-rep CSV, torch trace)")
    report.add_argument("--format", choices=("table", "json", "csv", "md", "html", "parquet", "sqlite"),
                        default="table",
                        help="table (default, for a terminal), json, csv (one table per file), md, html "
                             "(self-contained), parquet (one file per table into -o FOLDER) or sqlite (one "
                             "database -o FILE: a table per report table, a view per section)")
    report.add_argument("--output", "-o", metavar="FILE", help="write there instead of stdout (a new file)")
    report.add_argument("--force", action="store_true",
                        help="let -o replace an existing file (never a run's own files or the report's input)")
    report.add_argument("--top", type=int, default=10, metavar="N", help="rows per table (default 10)")
    job = report.add_argument_group("SLURM job folders")
    job.add_argument("--raw", action="store_true",
                     help="read every rank's raw files instead of merging the ranks' partials (same numbers, slower)")
    job.add_argument("--on-cluster", action="store_true",
                     help="reduce each node's ranks where their files are (one srun job step per node, e.g. "
                          "node-local scratch before the copy back) and merge the partials here")
    job.add_argument("--nodes", metavar="LIST",
                     help="with --on-cluster: the nodes to reduce on, e.g. node1,node2 (default: the job's nodes)")
    job.add_argument("--dry-run", action="store_true", help="with --on-cluster: print the srun argv per node; run nothing")
    job.add_argument("--reduce-here", action="store_true",
                     help="reduce this node's ranks of the job folder and print their partials (what each "
                          "--on-cluster job step runs); on a bare profiler output, write one partial per rank "
                          "to -o FOLDER (default PATH/profilectl-partials/), which `report PATH` then merges")
    _report_window_options(report)


def _report_window_options(report: argparse.ArgumentParser) -> None:
    window = report.add_mutually_exclusive_group()
    window.add_argument("--range", dest="report_range", metavar="NAME",
                        help="only what was launched inside the ranges of this name (record_function, "
                             "user_annotation, ProfilerStep, ROCTx, a jax.profiler step annotation): kernels, copies "
                             "and the timeline")
    window.add_argument("--steps", dest="report_steps", metavar="A:B",
                        help="only steps A to B-1 (ProfilerStep#N marks, or those of --step-mark): kernels, copies "
                             "and the timeline")
    report.add_argument("--step-mark", dest="report_step_mark", metavar="NAME",
                        help="the ranges of this name (a user annotation, ROCTx range ...) are the steps, numbered "
                             "from 0 in time order: the per-step rows, the diagnosis and --steps follow them")


def _query_options(query: argparse.ArgumentParser) -> None:
    query.add_argument("path", metavar="PATH", help="a run directory, a SLURM job folder, or a profiler's own output")
    query.add_argument("sql", metavar="SQL",
                       help='one statement, e.g. "SELECT name, total_ns FROM kernels ORDER BY total_ns DESC"')
    query.add_argument("--format", choices=("table", "csv", "json"), default="table",
                       help="table (default), csv or json (one object per row)")
    query.add_argument("--timeout", type=float, metavar="S", default=None,
                       help="stop the query after S seconds, exit 124 (default $PROFILECTL_QUERY_TIMEOUT_S, else 300; "
                            "0: no bound)")
    query.add_argument("--memory-mb", type=float, metavar="MB", default=None,
                       help="SQLite's memory for the query beyond the tables, exit 7 past it (default "
                            "$PROFILECTL_QUERY_MEMORY_MB, else 1024; 0: no bound)")


def _compare_options(compare: argparse.ArgumentParser) -> None:
    compare.add_argument("run_a", metavar="RUN_A", help="the baseline: a run, job folder or profiler output (BASE)")
    compare.add_argument("run_b", metavar="RUN_B", help="the one compared with it (NEW)")
    compare.add_argument("--format", choices=("table", "json", "md"), default="table",
                         help="table (default), json, or md (for a pull-request comment)")
    compare.add_argument("--top", type=int, default=15, metavar="N", help="kernels shown (default 15)")
    compare.add_argument("--match", choices=("exact", "base"), default="exact",
                         help="exact: full kernel names (default); base: function names only, for "
                              "comparing across tools that spell namespaces/templates differently")
    gate = compare.add_argument_group("CI gate (run_a is BASE, run_b is NEW)")
    gate.add_argument("--fail-if-slower", metavar="PCT", dest="fail_if_slower",
                      help="exit 6 when NEW is slower than BASE by more than PCT percent (0 to 1000) on --metric")
    gate.add_argument("--metric", metavar="METRIC",
                      help="gpu-time (kernels, copies and memsets), kernel-time, copy-time, kernel:REGEX (the "
                           "kernels whose name matches), step-time (steady-state step), wall-time (timing median, else "
                           "the run's wall time); default: gpu-time when both runs have GPU activity, else wall-time")


def _docker_options_of(docker: argparse.ArgumentParser) -> None:
    docker.add_argument("--vendor", choices=("auto", "amd", "nvidia", "none"), default="auto",
                        help="which GPU device grants to add: the AMD or NVIDIA compose override, or none "
                             "(default: auto, the GPU this host has)")
    docker.add_argument("--build", action="store_true", help="rebuild the image first (else built only if missing)")
    docker.add_argument("service", metavar="SERVICE", nargs="?", help="env-check, profile, counters or trace")
    docker.add_argument("service_args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="what `docker compose run SERVICE` takes after the service, passed as written: the "
                             "service's options and the workload after -- (`--repeat 2 -- ./app`), a program "
                             "(`python3 train.py`), or a profilectl command line (`env-check --json`)")


def _cluster_options(cluster: argparse.ArgumentParser) -> None:
    cluster.add_argument("action", choices=("up", "down", "status", "exec", "build", "logs"),
                         help="up: build and start the controller and two nodes; down: remove them; status: the "
                              "nodes and jobs; exec: run a command in the controller; build: the image only; "
                              "logs: the daemons' logs")
    cluster.add_argument("workload", nargs=argparse.SUPPRESS, metavar="-- CMD",
                         help="for exec: the command to run in the controller, after --")


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[name]
    return chosen


def _docker_options(service_args: list[str]) -> tuple[list[str], dict[str, object]]:
    """--vendor/--build written after the service (older forms): no service takes them, so they are
    the driver's; everything else, and all after `--`, goes to the service as written."""
    end = service_args.index("--") if "--" in service_args else len(service_args)
    kept: list[str] = []
    found: dict[str, object] = {}
    index = 0
    while index < end:
        word = service_args[index]
        if word == "--build":
            found["build"] = True
        elif word == "--vendor" and index + 1 < end:
            found["vendor"] = service_args[index + 1]
            index += 1
        elif word.startswith("--vendor="):
            found["vendor"] = word.split("=", 1)[1]
        else:
            kept.append(word)
        index += 1
    return kept + service_args[end:], found


def parse(argv: list[str]) -> argparse.Namespace:
    """Options before `--`, the workload after it (argparse cannot mix a positional service name,
    options and a trailing command reliably). `docker SERVICE ...` keeps everything after the service
    as written, as `docker compose run` does."""
    only = argv[0] if argv and argv[0] in COMMANDS else None
    if argv[:1] == ["docker"]:
        cut = argv.index("--") if "--" in argv else len(argv)  # argparse would drop that `--`
        parser = build_parser(only)
        args = parser.parse_args(argv[:cut])
        if args.service is None:  # checked here: argparse would call the optional ARGS required too
            _subparser(parser, "docker").error("the following argument is required: SERVICE")
        args.service_args, moved = _docker_options(args.service_args + argv[cut:])
        vendors = ("auto", "amd", "nvidia", "none")
        if "vendor" in moved and moved["vendor"] not in vendors:
            _subparser(parser, "docker").error(f"argument --vendor: invalid choice: {moved['vendor']!r} "
                                               f"(choose from {', '.join(map(repr, vendors))})")
        for key, value in moved.items():
            setattr(args, key, value)
        return args
    head, tail = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = build_parser(only).parse_args(head)
    before = getattr(args, "workload", None) or []
    if before and tail:
        args.workload = before + ["--"] + tail  # a `--` that belongs to the workload itself
    else:
        args.workload = before or tail
    return args


def _bounds_of(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    return (("kernel", args.kernel), ("exclude_kernel", args.exclude_kernel), ("launch_skip", args.launch_skip),
            ("launch_count", args.launch_count), ("steps", args.steps), ("nvtx_range", args.nvtx_range),
            ("profiler_args", args.profiler_args))


def _attach_of(args: argparse.Namespace) -> dict[str, object]:
    return {"attach": args.attach, "duration": args.duration, "ranks": args.ranks}


def run_options(args: argparse.Namespace) -> "RunOptions":
    """The options of a measuring command (profile, counters, trace) as one value (measuring.RunOptions):
    the CLI and the Python API (profilectl.run) parse the same words into the same request."""
    from profilectl.measuring import RunOptions
    extra = {"profile": lambda: {"repeat": args.repeat, "warmup": args.warmup, "torch_pass": args.torch_pass,
                                 "live": args.live},
             "counters": lambda: {"counter_set": args.counter_set, "fallback": args.fallback,
                                  "clock_control": args.clock_control, "bounds": _bounds_of(args),
                                  "include_collectives": args.include_collectives, **_attach_of(args)},
             "trace": lambda: {"preset": args.preset, "bounds": _bounds_of(args), "live": args.live,
                               "shapes": args.shapes, "memory": args.memory, **_attach_of(args)}}[args.command]()
    return RunOptions(service=args.command, workload=tuple(args.workload), dry_run=args.dry_run, as_json=args.json,
                      quiet=args.quiet, backend=args.backend, timeout=args.timeout, traces_dir=args.traces_dir,
                      env_items=tuple(args.env), serialize=args.serialize, sample=not args.no_sample,
                      as_root=args.as_root, redact=not args.no_redact, **extra)


# CPython collects the youngest objects every 700 new ones. A command imports its modules as it goes
# (polars, numpy, the analysis: ~100k objects that live as long as the process, no garbage among
# them), which made ~180 passes and one over the whole heap: ~35 ms of a 0.5 s `report` (12-19 ms
# still at 20,000: each pass walks what the imports made since the last). At 100,000 a cold report
# of 400 k dispatches makes none; a long command still collects its cycles (bench/targets.py's cold start).
YOUNG_OBJECTS_PER_COLLECTION = 100_000


def main(argv: list[str] | None = None) -> int:
    gc.set_threshold(YOUNG_OBJECTS_PER_COLLECTION, *gc.get_threshold()[1:])
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        build_parser().print_help()
        return errors.USAGE
    try:
        settings.check_environment()
        if args.command == "env-check":
            return commands.env_check(args.json, args.deep, args.require, args.root, args.path)
        if args.command in ("profile", "counters", "trace"):
            from profilectl import measuring
            return measuring.measure(run_options(args))
        if args.command == "ls":
            return commands.ls(args.traces_dir, args.json)
        if args.command == "report":
            if args.report_range is not None or args.report_steps is not None or args.report_step_mark is not None:
                return commands.report_window(args.path, args.format, args.output, args.top, args.force,
                                              args.report_range, args.report_steps, args.report_step_mark)
            job = commands.JobOptions(raw=args.raw, on_cluster=args.on_cluster, nodes=args.nodes,
                                      dry_run=args.dry_run, reduce_here=args.reduce_here)
            return commands.report(args.path, args.format, args.output, args.top, args.force, job)
        if args.command == "query":
            return commands.query(args.path, args.sql, args.format, args.timeout, args.memory_mb)
        if args.command == "compare":
            return commands.compare(args.run_a, args.run_b, args.format, args.top, args.match,
                                    fail_if_slower=args.fail_if_slower, metric=args.metric)
        if args.command == "docker":
            return commands.docker(args.service, args.service_args, args.vendor, args.build)
        if args.command == "merge-trace":
            return commands.merge_trace(args.path, args.output, args.steps, args.max_mb, args.force, args.json)
        if args.command == "cluster":
            return commands.cluster(args.action, args.workload)
        if args.command == "watch":
            return commands.watch(args.path, args.interval)
    except errors.ProfilectlError as exc:
        commands.say(" ".join(str(exc).split()))  # always one line
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("profilectl: interrupted\n")
        return errors.INTERRUPTED
    except BrokenPipeError:
        return errors.OK
    except OSError as exc:  # the machine's refusal (permissions, a full disk): one line, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        commands.say(f"{where}{exc.strerror or exc}")
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        return errors.DISK_FULL if full else errors.USAGE
    build_parser().error(f"unknown command {args.command}")
    return errors.USAGE
