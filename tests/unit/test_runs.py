"""Run directories and manifests."""

import json
import os

import pytest

from profilectl import files, runs
from profilectl.errors import FormatError, UsageError
from profilectl.manifest import Manifest


def test_run_dirs_never_collide_even_with_the_same_id(tmp_path, monkeypatch):
    ids = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(runs.secrets, "token_hex", lambda n: next(ids))
    first = runs.create_run_dir(tmp_path, "trace")
    second = runs.create_run_dir(tmp_path, "trace")
    assert first != second and first.name.endswith("-trace-aaaaaa") and second.name.endswith("-trace-bbbbbb")


def test_run_dir_name_is_utc_timestamp_service_id(tmp_path):
    run = runs.create_run_dir(tmp_path / "new" / "traces", "counters")
    stamp, service, run_id = run.name.split("-")
    assert len(stamp) == 16 and stamp.endswith("Z") and service == "counters" and len(run_id) == 6


def test_unwritable_traces_root_is_a_usage_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="cannot create the traces folder"):
        runs.create_run_dir(blocker / "traces", "profile")


def test_atomic_manifest_leaves_no_temp_files(tmp_path):
    files.write_json_atomic(tmp_path / "manifest.json", {"status": "running"})
    files.write_json_atomic(tmp_path / "manifest.json", {"status": "ok"})
    assert json.loads((tmp_path / "manifest.json").read_text()) == {"status": "ok"}
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_host_owner_defaults_to_the_traces_folder_owner(tmp_path, monkeypatch):
    st = tmp_path.stat()
    assert runs.host_owner(tmp_path) == (st.st_uid, st.st_gid)
    monkeypatch.setenv("PROFILECTL_HOST_UID", "1234")
    assert runs.host_owner(tmp_path) == (1234, 1234)


def test_files_honour_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        files.write_json_atomic(tmp_path / "private.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    files.write_json_atomic(tmp_path / "shared.json", {"a": 1})
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o666 & ~old


@pytest.mark.parametrize("content, words", [
    ("[1, 2, 3]", "expected a JSON object, found list"),
    ('{"schema_version": 1}', "missing value for field"),
    ('{"schema_version": 1, "profilectl_version": "0.1", "service": "trace", "backend": "torch", "reason": "r", '
     '"fallbacks": [], "tool": null, "argv": [], "phases": [], "workload": [], "workload_source": "argument", '
     '"counter_set": null, "gpu": null, "started_at": 1763683200}', 'wrong value type for field "started_at"'),
    ('{"service": ', "not valid JSON"),
])
def test_a_manifest_that_is_not_one_is_one_line_naming_the_file(tmp_path, content, words):
    (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(FormatError) as caught:
        Manifest.read(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "manifest.json") in message and words in message and "\n" not in message
