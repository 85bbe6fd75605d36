"""What a rocprofv3 is and accepts, from its own --version (its rocprofiler-sdk version, 7.0+) and
--help (for a release newer than profiling/tools/rocprofv3.yaml knows, and for the options the
table cannot place by version).

rocprofv3's command line is argparse (every release read, 6.2 to 2026 develop), so `--help` lists
each option as argparse prints it: `  -i INPUT, --input INPUT`, `  --kernel-trace [BOOL]`,
`  --pmc [PMC ...]`, `  -f {csv,json,pftrace,otf2,rocpd} [...]`. The text is read once per tool
path and modification time and kept in the cache folder (cache_folder.py: the running user's own),
so a later run does not start the tool again.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from profilectl import cache_folder
from profilectl.probe.machine import CommandResult

HELP_TIMEOUT_S = 30.0
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)((?:[ =](?:\{[^}]*\}|\[[^\]]*\]|[A-Z_][A-Z0-9_.():]*))*)")


@dataclass(frozen=True)
class HelpFacts:
    """The options of one rocprofv3 as its --help lists them: option -> takes (flag, value, ...)."""
    options: dict[str, str] = field(default_factory=dict)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    multi_pass_pmc: bool = False  # --pmc help describes repeated --pmc as passes
    source: str = ""

    def has(self, option: str) -> bool:
        return option in self.options


def _takes(rest: str) -> str:
    rest = rest.strip()
    if not rest:
        return "flag"
    if rest.startswith("[") and "..." in rest:
        return "optional-values"
    if rest.startswith("["):
        return "optional-value"
    if "..." in rest:
        return "values"
    return "value"


def parse_help(text: str, source: str = "rocprofv3 --help") -> HelpFacts:
    """Options of an argparse --help text (the option column only: the first column of each entry)."""
    options: dict[str, str] = {}
    choices: dict[str, tuple[str, ...]] = {}
    pmc_help = ""
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if line.startswith("  ") and stripped.startswith("-"):
            # the option column ends at two spaces (the help text follows, or the next line)
            column = re.split(r"\s{2,}", stripped, maxsplit=1)[0]
            help_rest = stripped[len(column):]
            current = None
            for part in re.split(r",\s+(?=-)", column):
                match = _OPTION.match(part.strip())
                if not match:
                    continue
                name, rest = match.group(1), match.group(2)
                options[name] = _takes(rest)
                braces = re.search(r"\{([^}]*)\}", rest)
                if braces:
                    choices[name] = tuple(c.strip() for c in braces.group(1).split(","))
                current = name
            if current and "--pmc" in column:
                pmc_help = help_rest
                current = "--pmc"
            continue
        if current == "--pmc" and stripped:
            pmc_help += " " + stripped
        elif not stripped:
            current = None
    multi = bool(re.search(r"multi-?pass", pmc_help, re.I)) and bool(re.search(r"--pmc .*--pmc", pmc_help))
    return HelpFacts(options=options, choices=choices, multi_pass_pmc=multi, source=source)


def cache_key(tool_path: str) -> str | None:
    try:
        st = os.stat(tool_path)
    except OSError:
        return None
    return hashlib.sha256(f"{os.path.realpath(tool_path)}\0{st.st_mtime_ns}\0{st.st_size}".encode()).hexdigest()[:24]


def _cached_output(tool_path: str, flag: str, run: Callable[[list[str]], CommandResult]) -> str | None:
    """What `TOOL FLAG` prints, kept per tool path and modification time (a later run does not start
    the tool again); None when it prints nothing."""
    key = cache_key(tool_path)
    kind = f"rocprofv3-{flag.strip('-') or 'output'}"
    cached = f"{key}.txt" if key else None
    text = cache_folder.read_text(kind, cached) if cached is not None else None
    if text is not None:
        return text
    result = run([tool_path, flag])
    text = result.stdout if result.stdout.strip() else result.output
    if not text.strip():
        return None
    if cached is not None:  # a cache that cannot be written only costs a tool start next time
        cache_folder.keep(kind, cached, text)
    return text


def help_facts(tool_path: str, run: Callable[[list[str]], CommandResult]) -> HelpFacts | None:
    """The tool's --help, parsed; read from the cache when this tool (path, mtime) was seen before.
    None when the tool prints no usable help (then nothing beyond the known table is assumed)."""
    text = _cached_output(tool_path, "--help", run)
    if text is None or "--" not in text:
        return None
    facts = parse_help(text, f"{tool_path} --help")
    return facts if facts.options else None


def parse_version(text: str) -> tuple[int, ...] | None:
    """The rocprofiler-sdk version `rocprofv3 --version` prints (7.0+: `key: value` lines from its
    CONST_VERSION_INFO, `version` being the SDK's VERSION file, e.g. `    version: 1.0.0`)."""
    match = re.search(r"^\s*version\s*:\s*(\d+(?:\.\d+)+)", text, re.MULTILINE)
    return tuple(int(p) for p in match.group(1).split(".")[:3]) if match else None


def sdk_version(tool_path: str, run: Callable[[list[str]], CommandResult]) -> tuple[int, ...] | None:
    """The rocprofiler-sdk version of this rocprofv3 from its own --version (None: it has none,
    as before ROCm 7.0, or prints no version line)."""
    text = _cached_output(tool_path, "--version", run)
    return parse_version(text) if text else None
