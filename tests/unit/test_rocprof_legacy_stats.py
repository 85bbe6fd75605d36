"""Legacy rocprof's statistics files, read alone or together (real files: tests/fixtures/
rocprof-v1-stats, see tests/fixtures/README.md)."""

import shutil

import pytest

from profilectl.backends import READERS
from profilectl.errors import FormatError
from profilectl.formats.reader import read_path
from support import FIXTURES

STATS = FIXTURES / "rocprof-v1-stats"
COPY_STATS = '"Name","Calls","TotalDurationNs","AverageNs","Percentage"\nCopyHostToDevice,4,2000,500,80.0\n' \
             'CopyDeviceToHost,1,500,500,20.0\n'


@pytest.mark.parametrize("names", [["results.hip_stats.csv"], ["results.hsa_stats.csv"], ["results.copy_stats.csv"],
                                   ["results.hip_stats.csv", "results.hsa_stats.csv", "results.copy_stats.csv"]])
def test_stats_files_alone_or_together(tmp_path, names):
    for name in names:
        if name == "results.copy_stats.csv":
            (tmp_path / name).write_text(COPY_STATS)
        else:
            shutil.copy(STATS / name, tmp_path / name)
    tables = read_path(tmp_path, READERS)
    api = tables.api
    if "results.hip_stats.csv" in names:
        assert api["hipMemcpy"].calls == 2 and api["hipMemcpy"].total == 583182462
    if "results.hsa_stats.csv" in names:
        assert api["hsa_signal_wait_scacquire"].calls == 1220 and len(api) >= 16
    if "results.copy_stats.csv" in names:
        assert tables.memory_copies["CopyHostToDevice"].calls == 4 and tables.memory_copies["CopyHostToDevice"].total == 2000
    else:
        assert not tables.memory_copies
    assert not tables.kernels  # API and copy statistics are not kernels


def test_an_unrelated_file_named_like_stats_is_not_claimed(tmp_path):
    (tmp_path / "results.hip_stats.csv").write_text("a,b\n1,2\n")
    with pytest.raises(FormatError, match="no profiler output recognised"):
        read_path(tmp_path, READERS)
