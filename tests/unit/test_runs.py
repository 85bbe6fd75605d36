"""Run directories and manifests."""

import json
import os

import pytest

from profilectl import runs
from profilectl.errors import UsageError


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
    runs.write_json_atomic(tmp_path / "manifest.json", {"status": "running"})
    runs.write_json_atomic(tmp_path / "manifest.json", {"status": "ok"})
    assert json.loads((tmp_path / "manifest.json").read_text()) == {"status": "ok"}
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_host_owner_defaults_to_the_traces_folder_owner(tmp_path, monkeypatch):
    st = tmp_path.stat()
    assert runs.host_owner(tmp_path) == (st.st_uid, st.st_gid)
    monkeypatch.setenv("PROFILECTL_HOST_UID", "1234")
    assert runs.host_owner(tmp_path) == (1234, 1234)
