import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FakeMachine  # noqa: E402
from support import FIXTURES  # noqa: E402


@pytest.fixture
def machine(tmp_path):
    return FakeMachine(tmp_path)


@pytest.fixture
def fixtures():
    return FIXTURES


@pytest.fixture
def device_fixtures():
    return FIXTURES / "nvidia-h200-device"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    for name in ("PROFILECTL_WORKLOAD", "PROFILECTL_TRACES_DIR", "PROFILECTL_PROBE_ROOT",
                 "PROFILECTL_HOST_UID", "PROFILECTL_HOST_GID", "PROFILECTL_PROFILING_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))
