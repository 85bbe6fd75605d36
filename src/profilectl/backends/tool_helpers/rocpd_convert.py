"""profilectl's rocpd conversion: CSV and Perfetto files from each rocpd database of a run, made
by AMD's own converter (`rocpd convert`, ROCm 7.0+), with a record of which tool made each file.

Started after rocprofv3 as a file with the standard library only:
`python -I -S rocpd_convert.py RAW_DIR -- CONVERTER...` (CONVERTER: the `rocpd` command, or
`python3 -m rocpd`). For every <name>_results.db under RAW_DIR it runs
`CONVERTER convert -i DB --output-format csv pftrace -d RAW_DIR/rocpd-convert/<folder> -o <name>`
(rocpd/__main__.py and output_config.py of rocm-rel-7.0: -i, --output-format csv pftrace otf2,
-d/--output-path, -o/--output-file) and writes RAW_DIR/rocpd-convert/made-by.json: file -> the
command that made it. It always exits 0: a failed conversion leaves the database, which profilectl
reads directly, and says so on stderr and in made-by.json.
"""

import json
import os
import subprocess
import sys

FOLDER = "rocpd-convert"


def main(argv):
    split = argv.index("--")
    raw, converter = argv[0], argv[split + 1:]
    out_root = os.path.join(raw, FOLDER)
    made_by, failures = {}, {}
    for folder, dirs, files in os.walk(raw):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) != out_root]
        for name in sorted(files):
            if not name.endswith("_results.db"):
                continue
            db = os.path.join(folder, name)
            rel = os.path.relpath(folder, raw)
            out = os.path.normpath(os.path.join(out_root, rel))
            before = set(_listing(out))
            argv_ = converter + ["convert", "-i", db, "--output-format", "csv", "pftrace",
                                 "-d", out, "-o", name[:-len("_results.db")]]
            done = subprocess.run(argv_, stdin=subprocess.DEVNULL)
            made = sorted(set(_listing(out)) - before)
            for path in made:
                made_by[os.path.relpath(path, raw)] = {"tool": " ".join(converter) + " convert",
                                                       "from": os.path.relpath(db, raw), "argv": argv_}
            if done.returncode != 0 or not made:
                failures[os.path.relpath(db, raw)] = f"exit {done.returncode}, {len(made)} files"
                sys.stderr.write(f"profilectl: rocpd convert of {db} failed ({failures[os.path.relpath(db, raw)]}); "
                                 "the database is read directly\n")
    if made_by or failures:
        os.makedirs(out_root, exist_ok=True)
        _write_new(os.path.join(out_root, "made-by.json"), json.dumps({"files": made_by, "failed": failures}, indent=1))
    return 0


def _write_new(path, text):
    """`text` as the complete file `path`: a new temporary (an unpredictable name, never through a
    link: files.write_into's rule, with the standard library alone), renamed; removed on a failure."""
    tmp = f"{path}.{os.urandom(8).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _listing(folder):
    for base, _dirs, files in os.walk(folder):
        for name in files:
            yield os.path.join(base, name)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
