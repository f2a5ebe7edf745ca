"""Shared fixtures for the supernet tests (helpers live in ctrnas.supernet.testing: importlib mode)."""

import pytest
import torch

from ctrnas.supernet.testing import make_schema


@pytest.fixture(autouse=True)
def one_thread():
    # Tiny tensors: with several busy cores, intra-op thread hand-offs cost ~100x the work itself.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def schema():
    return make_schema()
