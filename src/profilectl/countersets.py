"""Counter sets: data files under profiling/counters/, resolved for one GPU architecture.

A set is YAML (see profiling/counters/basic.yaml) or a legacy rocprof text file of `pmc:` lines,
each line one pass. Names may use {l2}, replaced by the architecture's L2 block from gpus.yaml
(TCC on CDNA, GL2C on RDNA).
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import operator
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from profilectl import data
from profilectl.errors import UsageError


@dataclass(frozen=True)
class CounterSet:
    """A counter set as its file says, resolved for one vendor and architecture."""
    name: str
    source: str
    description: str = ""
    counters: tuple[str, ...] = ()
    explicit_passes: tuple[tuple[str, ...], ...] | None = None  # a pmc: text file's lines, as written
    derived: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CounterPlan:
    """What the plan decided for a counters run: the counters, how they are split into passes
    (each pass re-runs the application on AMD), the derived metrics, and whether the names were
    checked against the GPU's own list."""
    name: str
    source: str
    counters: tuple[str, ...]
    passes: tuple[tuple[str, ...], ...]
    derived: dict[str, str] = field(default_factory=dict)
    validated: bool = False


def available_sets() -> list[str]:
    names: set[str] = set()
    for base in data.profiling_dirs():
        names.update(p.stem for p in (base / "counters").glob("*.yaml") if not p.name.startswith("_"))
    return sorted(names)


def locate(name_or_path: str) -> Path:
    """The file of a counter set given by name or path; UsageError with a suggestion if unknown."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".txt") or "/" in name_or_path:
        if path.is_dir():
            raise UsageError(f"counter set {name_or_path} is a folder: pass a YAML or pmc: text file, or a set name")
        if not path.is_file():
            raise UsageError(f"counter set file {name_or_path} does not exist")
        return path
    found = data.find(f"counters/{name_or_path}.yaml")
    if found is None:
        known = available_sets()
        close = difflib.get_close_matches(name_or_path, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"unknown counter set {name_or_path!r}{hint}; known sets: {', '.join(known)}")
    return found


def _expand(names: list[str], l2_block: str) -> tuple[str, ...]:
    return tuple(str(n).replace("{l2}", l2_block) for n in names)


def load(name_or_path: str, vendor: str | None, arch: str | None) -> CounterSet:
    path = locate(name_or_path)
    if path.suffix == ".txt":
        return _load_pmc_text(path)
    doc = data.load_yaml(path)
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a counter set is a mapping with 'amd' and/or 'nvidia' sections")
    facts = data.arch_facts(vendor, arch)
    l2_block = facts.get("l2_block", "TCC")
    family = str(facts.get("family") or "")
    counters: list[str] = []
    if vendor == "nvidia":
        section = doc.get("nvidia") or {}
        counters = list(section.get("metrics") or [])
    else:
        section = doc.get("amd") or {}
        counters = list(section.get("counters") or [])
    override = _for_arch(section.get("arch") or {}, arch, family)
    if override is not None:
        counters = list(override)
    derived_section = doc.get("derived") or {}
    if not isinstance(derived_section, dict):
        raise UsageError(f"{path}: 'derived' must map vendors to metric formulas")
    formulas = dict(derived_section.get(vendor or "amd") or {})
    # per-architecture formulas (derived: arch: {gfx90a: {...}}) replace or add to the vendor's; a
    # `drop` list removes those this architecture cannot count
    arch_formulas = _for_arch(derived_section.get("arch") or {}, arch, family) or {}
    if not isinstance(arch_formulas, dict):
        raise UsageError(f"{path}: derived formulas of {arch} must be a mapping")
    for name in arch_formulas.get("drop") or ():
        formulas.pop(name, None)
    formulas.update({k: v for k, v in arch_formulas.items() if k != "drop"})
    derived = {str(k): str(v).replace("{l2}", l2_block) for k, v in formulas.items()}
    for metric, expression in derived.items():
        problem = check_expression(expression)
        if problem:
            raise UsageError(f"{path}: derived metric {metric!r}: {problem}")
    if not all(isinstance(c, (str, int, float)) for c in counters):
        raise UsageError(f"{path}: counters must be a list of names")
    return CounterSet(name=path.stem, source=str(path), description=str(doc.get("description", "")),
                      counters=_expand(counters, l2_block), derived=derived)


def _for_arch(overrides: dict[str, Any], arch: str | None, family: str) -> Any:
    """The entry of an `arch:` mapping for this GPU: its architecture (gfx90a, sm_80), a family
    prefix (RDNA, Ampere) or an architecture prefix (gfx11); the first that matches, else None."""
    for key, value in overrides.items():
        key = str(key)
        if arch and (key == arch or arch.startswith(key)) or (family and family.startswith(key)):
            return value
    return None


def _load_pmc_text(path: Path) -> CounterSet:
    passes: list[tuple[str, ...]] = []
    try:
        text = path.read_bytes().decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (expected 'pmc: COUNTER ...' lines)") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if not line.startswith("pmc:"):
            raise UsageError(f"{path}:{number}: expected 'pmc: COUNTER ...', got {line[:40]!r}")
        names = tuple(line[4:].replace(",", " ").split())
        if names:
            passes.append(names)
    if not passes:
        raise UsageError(f"{path}: no 'pmc:' line with counters")
    return CounterSet(name=path.stem, source=str(path), counters=tuple(c for p in passes for c in p),
                      explicit_passes=tuple(passes))


def pmc_text(passes: tuple[tuple[str, ...], ...]) -> str:
    """The rocprof/rocprofv3 input file: one `pmc:` line per pass (each pass re-runs the app)."""
    return "".join(f"pmc: {' '.join(p)}\n" for p in passes)


def _block(counter: str) -> str | None:
    match = re.match(r"([A-Z][A-Z0-9]*)_", counter)
    return match.group(1) if match else None


def split_passes(counters: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Greedy packing: each pass holds at most the per-block limit of counters of each block."""
    limits = data.load_mapping("counters/_limits.yaml")
    default = int(limits.get("default", 4))
    blocks = {k: int(v) for k, v in (limits.get("blocks") or {}).items()}
    derived_limit = int(limits.get("derived_per_pass", 2))
    passes: list[tuple[list[str], dict[str, int]]] = []
    for counter in dict.fromkeys(counters):
        block = _block(counter)
        limit = blocks.get(block, default) if block else derived_limit
        key = block or "<derived>"
        for names, used in passes:
            if used.get(key, 0) < limit:
                names.append(counter)
                used[key] = used.get(key, 0) + 1
                break
        else:
            passes.append(([counter], {key: 1}))
    return tuple(tuple(names) for names, _ in passes)


def validate(counters: tuple[str, ...], available: set[str], where: str,
             key: Callable[[str], str] | None = None) -> None:
    """Raises UsageError naming every unknown counter, with a 'did you mean' for each.

    `key` maps a requested name to the form the listing uses (ncu lists metric bases)."""
    spell = key or (lambda name: name)
    unknown = [c for c in counters if spell(c) not in available]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(spell(name), sorted(available), n=1, cutoff=0.6)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    raise UsageError(f"{len(unknown)} counter(s) not available on {where}: {', '.join(parts)}")


# ------------------------------------------------------------ aggregation over dispatches
@functools.lru_cache(maxsize=None)
def _aggregation_rules() -> tuple[list[tuple[re.Pattern[str], str]], dict[str, Any]]:
    doc = data.load_mapping("counters/_aggregation.yaml")
    amd = [(re.compile(str(rule["match"])), str(rule["aggregate"])) for rule in doc.get("amd") or []]
    return amd, doc.get("nvidia") or {}


@functools.lru_cache(maxsize=4096)
def aggregation(counter: str, unit: str = "") -> str:
    """How this counter's per-dispatch values combine per kernel: sum, mean, max or min
    (profiling/counters/_aggregation.yaml). Nsight Compute metrics are named base__part.rollup."""
    amd, nvidia = _aggregation_rules()
    if "__" in counter or unit or " " in counter:  # Nsight Compute's (the yaml says why)
        if "__" in counter:
            for suffix, rule in sorted((nvidia.get("suffixes") or {}).items(), key=lambda item: -len(item[0])):
                if counter.endswith(suffix):
                    return str(rule)
        elif re.fullmatch(str(nvidia.get("launch_properties") or "(?!)"), counter):
            return "mean"
        if unit.lower() in (nvidia.get("units") or {}):
            return str(nvidia["units"][unit.lower()])
        if any(mark in unit for mark in nvidia.get("mean_units") or ()):
            return "mean"
        return str(nvidia.get("default", "sum"))
    return next((rule for pattern, rule in amd if pattern.search(counter)), "sum")


# ------------------------------------------------------------ derived metrics
_OPS: dict[type, Callable[..., float]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.USub: operator.neg}


def check_expression(expression: str) -> str | None:
    """Why a derived-metric formula cannot be evaluated, or None when it is well formed."""
    text = re.sub(r"[A-Za-z_][\w.]*", "x", expression)  # counter names may contain dots
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        return f"not a valid formula ({exc.msg}): {expression!r}"
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.operator,
                                 ast.unaryop, ast.Load)) or (isinstance(node, ast.BinOp) and type(node.op) not in _OPS) \
                or (isinstance(node, ast.UnaryOp) and type(node.op) not in _OPS):
            return f"only + - * / and parentheses are allowed: {expression!r}"
    return None


def evaluate(expression: str, values: dict[str, float]) -> float | None:
    """Arithmetic over counter values (names may contain dots); None when a value is missing or /0."""
    names = {f"v{i}": name for i, name in enumerate(sorted(values, key=len, reverse=True))}
    text = expression
    for alias, name in names.items():
        text = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", alias, text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in names:
            return float(values[names[node.id]])
        raise ValueError(ast.dump(node))

    try:
        result = walk(tree)
    except (ValueError, ZeroDivisionError, KeyError):
        return None
    return result if math.isfinite(result) else None


# Bare counter files carry no counter set: where they hold every counter a set needs, that set's
# derived metrics apply (the roofline of an ncu CSV or rocprofv3 capture a user brings).
DERIVABLE_SETS = {"nvidia": (None,), "amd": ("gfx942", "gfx90a", "gfx950")}


def derived_for_files(counter_names: set[str], set_name: str = "roofline") -> dict[str, str]:
    """The derived metrics of the first architecture's set whose counters the files hold: all of
    them, else every counter its bytes_* formulas name (the traffic at each level, which tells the
    architectures' counter names apart). A tool that collects its own counter list (rocprof-compute's
    pmc_perf.csv has no OccupancyPercent, and FP8 only from some release) still gets the bytes and the
    work its counters give; a formula whose counter is missing evaluates to nothing."""
    if not counter_names:
        return {}
    vendor = "nvidia" if any("__" in name for name in counter_names) else "amd"
    sets = []
    for arch in DERIVABLE_SETS[vendor]:
        try:
            sets.append(load(set_name, vendor, arch))
        except UsageError:
            continue
    for found in sets:
        if found.counters and set(found.counters) <= counter_names:
            return dict(found.derived)
    for found in sets:
        traffic = {name for metric, formula in found.derived.items() if metric.startswith("bytes_")
                   for name in re.findall(r"[A-Za-z_][\w.]*", formula)}
        if traffic and traffic <= counter_names:
            return dict(found.derived)
    return {}
