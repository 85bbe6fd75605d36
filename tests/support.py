"""Paths and small helpers every test module shares (imported as `support`: two conftest.py files
cannot both be imported by that name)."""

import os
import select
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # real tool outputs, provenance in its README


def read_terminal(leader: int, timeout: float = 120.0) -> bytes:
    """All a pseudo-terminal's leader end gives until the other end is closed by everyone (EOF, or
    EIO as Linux says it) or `timeout` seconds have passed."""
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not select.select([leader], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: every process holding the other end has closed it
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)
