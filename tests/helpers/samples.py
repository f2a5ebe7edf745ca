"""The real-format CTR samples of the shared data folder (beside the checkout); tests skip without them."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_CTR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "ctr"
CRITEO_SAMPLE = SHARED_CTR / "criteo_kaggle_sample.tsv"
AVAZU_SAMPLE = SHARED_CTR / "avazu_sample.csv"


def need(path: Path) -> Path:
    """`path`, or skip the test with the reason when the shared sample is not there."""
    if not path.exists():
        pytest.skip(f"shared sample {path} not present (only in the project workspace)")
    return path
