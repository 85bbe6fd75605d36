"""profilectl's rank gate: run the profiler in the selected ranks only (`--ranks`, where the
installed rocprofv3 has no --profile-mpi-ranks: before ROCm 7.2).

Started by the launcher in place of each rank's profiler, as a file with the standard library only
(`python -I -S rank_gate.py --ranks 0-3,8 --rank-env OMPI_COMM_WORLD_RANK,PMI_RANK -- PROFILER... --
PROGRAM...`). A rank whose number (the first set variable of --rank-env) is selected becomes the
profiler (exec, same pid); any other rank becomes its program directly, unprofiled. A rank with no
number is profiled, as rocprofv3 7.2 does.
"""

import os
import sys


def ranks_of(spec):
    chosen = set()
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        chosen.update(range(int(first), int(last or first) + 1))
    return chosen


def main(argv):
    split = argv.index("--")
    own, rest = argv[:split], argv[split + 1:]
    options = dict(zip(own[::2], own[1::2]))
    selected = ranks_of(options["--ranks"])
    number = next((os.environ[v] for v in options.get("--rank-env", "").split(",") if os.environ.get(v)), None)
    if number is None or int(number) in selected:
        command = rest
    else:
        command = rest[rest.index("--") + 1:]  # the program after the profiler's own `--`
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
