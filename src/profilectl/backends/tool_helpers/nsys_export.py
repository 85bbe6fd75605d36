"""profilectl's Nsight Systems export: the SQLite export of each report of a run, made by the same
nsys that profiled it, so that the run's folder reads anywhere (also where no nsys is installed).

Started after `nsys profile` as a file with the standard library only:
`python -I -S nsys_export.py RAW_DIR -- NSYS export --type sqlite --force-overwrite true --output`
(the argv of profiling/tools/nsys.yaml `export`). For every <name>.nsys-rep (or .qdrep) under RAW_DIR
it runs that argv with `<name>.sqlite <name>.nsys-rep` appended. It always exits 0 (the profile
itself went well): a report that was not exported is named on stderr and kept, and profilectl's
reader exports it again (or says what it needs) when the run is read.
"""

import os
import subprocess
import sys

SUFFIXES = (".nsys-rep", ".qdrep")


def main(argv):
    split = argv.index("--")
    raw, export = argv[0], argv[split + 1:]
    failed = []
    for folder, _dirs, files in os.walk(raw):
        for name in sorted(files):
            stem, suffix = os.path.splitext(name)
            if suffix not in SUFFIXES:
                continue
            report = os.path.join(folder, name)
            output = os.path.join(folder, stem + ".sqlite")
            done = subprocess.run(export + [output, report], stdin=subprocess.DEVNULL)
            if done.returncode != 0 or not os.path.isfile(output):
                failed.append(f"{name} (exit code {done.returncode})")
    if failed:
        sys.stderr.write(f"profilectl: nsys export --type sqlite failed for {', '.join(failed)}; the reports are kept\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
