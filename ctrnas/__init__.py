"""ctrnas: sub-one-shot neural architecture search for CTR models on PyTorch and TorchRec."""

__version__ = "0.1.0"
