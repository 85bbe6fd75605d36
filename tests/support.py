"""Paths every test module shares (imported as `support`: two conftest.py files cannot both be
imported by that name)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # real tool outputs, provenance in its README
