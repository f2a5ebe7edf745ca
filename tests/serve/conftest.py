"""The real-format samples: written by the tests, and the workspace's genuine files where present (the criteo
models several tests read, exported once per test run, are tests/conftest.py's `criteo_exported`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.samples import SOURCES, sample


@pytest.fixture(params=SOURCES)
def criteo_sample(request) -> Path:
    return sample("criteo", request.param)


@pytest.fixture(params=SOURCES)
def avazu_sample(request) -> Path:
    return sample("avazu", request.param)
