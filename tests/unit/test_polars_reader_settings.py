"""polars' CSV read-ahead setting (polars_csv.CSV_CHUNK_BYTES) is set only while a query runs:
never left for a workload started later, a value the user set kept, a failed read cleaned up."""

import os

import pytest

from profilectl.errors import FormatError, UsageError
from profilectl.formats import polars_csv

HEADER = '"Kind","Agent_Id","Queue_Id","Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
VAR = "POLARS_CSV_CHUNK_SIZE"


def trace(path, rows, bad_row=None):
    lines = [HEADER] + [f'"KERNEL_DISPATCH","Agent 4",1,"k{i % 3}",{i + 1},{1000 * i},'
                        f'{"" if i == bad_row else 1000 * i + 500}\n' for i in range(rows)]
    path.write_text("".join(lines))
    return path


@pytest.fixture(autouse=True)
def no_setting(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.setattr(polars_csv, "_SETTINGS_LEFT", False)
    monkeypatch.setattr(polars_csv, "BATCH_ROWS", 1_000)


def test_set_only_while_a_query_runs(tmp_path):
    seen = []
    path = trace(tmp_path / "1_kernel_trace.csv", 5_000)

    class Spy:
        def add(self, *args):
            seen.append(os.environ.get(VAR))
    polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp", feed=Spy())  # type: ignore[arg-type]
    assert seen and set(seen) == {polars_csv.CSV_CHUNK_BYTES}
    assert VAR not in os.environ
    polars_csv.grouped_durations_csv(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert VAR not in os.environ


def test_a_value_the_user_set_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(VAR, "123456789")
    path = trace(tmp_path / "1_kernel_trace.csv", 3_000)
    polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert os.environ[VAR] == "123456789"


def test_a_failed_read_leaves_nothing_for_a_workload(tmp_path):
    bad = trace(tmp_path / "1_kernel_trace.csv", 5_000, bad_row=2_500)
    with pytest.raises(FormatError, match=":2502: truncated or malformed row"):
        polars_csv.grouped_durations_csv(bad, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert VAR not in os.environ  # a query run to its end: taken back at once
    garbled = tmp_path / "3_kernel_trace.csv"
    garbled.write_text(bad.read_text().replace(",11,10000,", ",11,notanumber,", 1))
    with pytest.raises(FormatError, match="truncated or malformed CSV"):
        polars_csv.grouped_durations_csv(garbled, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    assert VAR not in os.environ  # failed inside polars: taken back too
    with pytest.raises(FormatError, match=":2502: truncated or malformed row"):
        polars_csv.trace_columns(bad, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    # a query left unfinished may be running: the setting stays, but no child gets it...
    assert polars_csv.child_environment({VAR: polars_csv.CSV_CHUNK_BYTES, "PATH": "/bin"}) == {"PATH": "/bin"}
    # ...and the next query takes it back
    polars_csv.trace_columns(trace(tmp_path / "2_kernel_trace.csv", 3_000), "Kernel_Name", "Start_Timestamp",
                             "End_Timestamp")
    assert VAR not in os.environ and not polars_csv._SETTINGS_LEFT


@pytest.mark.parametrize("value", ["abc", "0", " 4000000", "-1"])
def test_a_value_polars_cannot_read_is_one_line_not_a_panic(tmp_path, monkeypatch, value):
    """polars' reader thread panics on such a value and the query then yields nothing ("no
    records"): it is named before the query starts."""
    monkeypatch.setenv(VAR, value)
    path = trace(tmp_path / "1_kernel_trace.csv", 3_000)
    with pytest.raises(UsageError, match="POLARS_CSV_CHUNK_SIZE=.*positive whole number"):
        polars_csv.trace_columns(path, "Kernel_Name", "Start_Timestamp", "End_Timestamp")
