import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FakeMachine  # noqa: E402

SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"
if not SHARED_FIXTURES.is_dir():  # CI clones main with shared/ beside it; a checkout may keep it inside
    SHARED_FIXTURES = REPO / "shared" / "fixtures"


@pytest.fixture
def machine(tmp_path):
    return FakeMachine(tmp_path)


@pytest.fixture
def shared_fixtures():
    assert SHARED_FIXTURES.is_dir(), f"shared fixtures not found at {SHARED_FIXTURES}"
    return SHARED_FIXTURES


@pytest.fixture
def device_fixtures():
    return Path(__file__).resolve().parent / "fixtures" / "nvidia-h200-device"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    for name in ("PROFILECTL_WORKLOAD", "PROFILECTL_TRACES_DIR", "PROFILECTL_PROBE_ROOT",
                 "PROFILECTL_HOST_UID", "PROFILECTL_HOST_GID", "PROFILECTL_PROFILING_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))
