"""`env-check --json` without the planner on a machine already assessed.

The assessment (what each service would pick, each capability's verdict) is a function of the
probed Facts, the tools' files, profilectl's code and its data files only, so it is kept keyed by
exactly those: the Facts as JSON (less the probe's own duration), each tool file's identity and
stamp.code_and_data(). Other Facts (a GPU added,
a tool upgraded, a permission changed) or other code or data make another key. Importing the
planner and every backend costs more than the probe itself; a kept assessment is one small JSON
read. Location: the cache folder (cache_folder.py: the running user's own)/assessments. A cache that cannot be read or written is skipped.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from profilectl import stamp
from profilectl import cache_folder
from profilectl.probe.facts_cache import identity

if TYPE_CHECKING:
    from profilectl.facts import Facts

FORMAT = "1"
FACTS_FIRST = ("schema_version", "host", "gpus", "rocm", "tools", "torch")  # EnvReport.to_dict's order
FACTS_LAST = ("checks", "notes", "probe_seconds")


def _key(facts: dict[str, Any]) -> str:
    stable = {k: v for k, v in facts.items() if k != "probe_seconds"}
    text = json.dumps(stable, sort_keys=True, default=str)
    # each tool's file too: a backend may read more than its version from it (a rocprofv3 newer than
    # profiling/tools knows is judged by its own --help), and a rebuild can keep the version
    tools = facts.get("tools") or {}
    files = "\0".join(f"{name}={identity(str(tool.get('path')))}" for name, tool in sorted(tools.items())
                      if isinstance(tool, dict))
    return hashlib.sha256(f"{FORMAT}\0{stamp.code_and_data()}\0{text}\0{files}".encode()).hexdigest()[:32]


def env_report_dict(facts: "Facts") -> dict[str, Any]:
    """EnvReport(facts, assess(facts)).to_dict(), the assessment read back when kept."""
    facts_dict = facts.to_dict()
    entry = f"{_key(facts_dict)}.json"
    assessment: dict[str, Any] | None = None
    try:
        saved = json.loads(cache_folder.read("assessments", entry) or b"null")
        if isinstance(saved, dict) and isinstance(saved.get("capabilities"), dict):
            assessment = saved
    except (ValueError, RecursionError):
        pass
    if assessment is None:
        import dataclasses

        from profilectl.plan import assess
        # a JSON round trip, so a fresh answer prints exactly as a kept one does
        assessment = json.loads(json.dumps(dataclasses.asdict(assess(facts)), default=str))
        cache_folder.keep("assessments", entry, json.dumps(assessment))
    ordered = {key: facts_dict[key] for key in FACTS_FIRST}
    ordered.update(assessment)
    ordered.update({key: facts_dict[key] for key in FACTS_LAST})
    return ordered
