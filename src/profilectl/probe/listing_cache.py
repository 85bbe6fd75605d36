"""Counter listings (`rocprofv3 -L`, `rocprofv3-avail list --pmc`, `ncu --query-metrics` ...) kept
per machine and release, so `counters --dry-run` validates names without starting the tool again.

Key: the host name, the ROCm version, the GPU architectures, the listing argv and the listing
tool's modification time: another machine, another release, another GPU or an updated tool lists
again. Only a listing that ran and printed something is kept. Location: the cache folder
(cache_folder.py: the running user's own)/counter-listings.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable

from profilectl import cache_folder
from profilectl.facts import Facts
from profilectl.probe.machine import CommandResult

Lister = Callable[[list[str]], CommandResult]


def listing_key(facts: Facts, argv: list[str]) -> str:
    try:
        mtime = os.stat(argv[0]).st_mtime_ns if argv else 0
    except OSError:
        mtime = 0
    parts = [facts.host.hostname or "", facts.rocm.version or "", ",".join(g.arch or "?" for g in facts.gpus),
             "\0".join(argv), str(mtime)]
    return hashlib.sha256("\0\0".join(parts).encode()).hexdigest()[:24]


def cached_lister(facts: Facts, run: Lister | None) -> Lister:
    """`run` through the cache; with run=None (nothing may be started) only cached listings answer."""
    def lister(argv: list[str]) -> CommandResult:
        name = f"{listing_key(facts, argv)}.json"
        try:
            saved = json.loads(cache_folder.read("counter-listings", name) or b"null")
            return CommandResult(argv, int(saved["returncode"]), str(saved["stdout"]), str(saved["stderr"]))
        except (ValueError, KeyError, TypeError, RecursionError):
            pass
        if run is None:
            return CommandResult(argv, None, error="no cached listing")
        result = run(argv)
        if result.ok and result.output.strip():  # a cache that cannot be written costs one listing next time
            cache_folder.keep("counter-listings", name, json.dumps({"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
                                   "argv": argv}))
        return result
    return lister
