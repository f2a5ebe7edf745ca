"""Shared fixtures for the supernet tests (helpers live in ctrnas.supernet.testing: importlib mode)."""

import pytest

from ctrnas.supernet.testing import make_schema


@pytest.fixture
def schema():
    return make_schema()
