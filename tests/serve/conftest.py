"""Paths of the real-format samples (the shared data folder; tests skip without it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.samples import AVAZU_SAMPLE, CRITEO_SAMPLE, need


@pytest.fixture
def criteo_sample() -> Path:
    return need(CRITEO_SAMPLE)


@pytest.fixture
def avazu_sample() -> Path:
    return need(AVAZU_SAMPLE)
