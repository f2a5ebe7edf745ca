"""Suite-wide settings: one intra-op thread (tiny tensors run ~100x slower with 2 threads on a busy box)."""

import torch

torch.set_num_threads(1)
