"""Suite-wide settings: one intra-op thread for every test (tiny tensors run ~10-100x slower with 2 threads
on a busy 2-core box, where OpenMP workers spin); reset before each test, since commands under test may
set their own thread count."""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)
    yield
