"""Paths of the real-format samples (the shared data folder; tests skip without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "ctr"


@pytest.fixture
def criteo_sample() -> Path:
    p = SHARED / "criteo_kaggle_sample.tsv"
    if not p.exists():
        pytest.skip(f"shared sample {p} not present (only in the project workspace)")
    return p


@pytest.fixture
def avazu_sample() -> Path:
    p = SHARED / "avazu_sample.csv"
    if not p.exists():
        pytest.skip(f"shared sample {p} not present (only in the project workspace)")
    return p
