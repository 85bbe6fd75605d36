"""The live half of the counter probe (`env-check --deep`): run the real profiler, read its words.

AMD: `rocprofv3 -L` initialises aqlprofile for every GPU (the step that aborts with "aqlprofile API
table load failed"), then, when PyTorch is there, one counter on a tiny kernel. NVIDIA: ncu with one
metric on a tiny kernel, which is where ERR_NVGPUCTRPERM shows.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from profilectl.probe.diagnose import diagnose
from profilectl.probe.machine import CommandResult, Machine
from profilectl.facts import Facts, Verdict

LIVE_TIMEOUT_S = 60.0
TINY_TORCH_KERNEL = "import torch; x = torch.ones(1024, device='cuda'); (x * 2).sum().item()"


def _verdict(result: CommandResult, what: str) -> Verdict:
    found = diagnose(result.output, result.returncode)
    if found:
        return Verdict(False, f"{what}: {found.reason}", found.fix, cause=found.cause)
    if result.timed_out:
        return Verdict(False, f"{what} did not finish within {LIVE_TIMEOUT_S:.0f} s", cause="live-timeout")
    if result.error:
        return Verdict(False, f"{what} could not start: {result.error}", cause="live-not-started")
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        return Verdict(False, f"{what} failed (exit {result.returncode}): {last[0][:160]}", cause="live-failed")
    return Verdict(True, f"{what} succeeded")


def probe_counters(facts: Facts, machine: Machine) -> Verdict | None:
    python = facts.torch.python or "python3"
    rocprofv3_tool, ncu_tool = facts.tool("rocprofv3"), facts.tool("ncu")
    if facts.first_gpu("amd") and rocprofv3_tool:
        rocprofv3 = rocprofv3_tool.path
        listing = _verdict(machine.run([rocprofv3, "-L"], timeout_s=LIVE_TIMEOUT_S), "live probe `rocprofv3 -L`")
        if not listing.available or facts.torch.backend != "rocm":
            return listing
        # An input file rather than --pmc: `-i` with `pmc:` lines exists in every rocprofv3 release.
        with tempfile.TemporaryDirectory(prefix="profilectl-live-probe-") as tmp:
            input_file = Path(tmp) / "input.txt"
            input_file.write_text("pmc: SQ_WAVES\n")
            result = machine.run([rocprofv3, "-i", str(input_file), "--output-format", "csv", "-d", tmp,
                                  "--", python, "-c", TINY_TORCH_KERNEL], timeout_s=LIVE_TIMEOUT_S)
        return _verdict(result, "live probe: SQ_WAVES on a tiny PyTorch kernel")
    if facts.first_gpu("nvidia") and ncu_tool and facts.torch.backend == "cuda":
        result = machine.run([ncu_tool.path, "--metrics", "sm__warps_launched.sum",
                              "--target-processes", "all", python, "-c", TINY_TORCH_KERNEL],
                             timeout_s=LIVE_TIMEOUT_S)
        return _verdict(result, "live probe: ncu on a tiny PyTorch kernel")
    return None
