"""ctrnas: sub-one-shot neural architecture search for CTR models on PyTorch and TorchRec."""

import logging as _logging

__version__ = "0.9.0"

# torch warns that `is_fx_tracing` also covers torch.export each time TorchRec calls it (every KeyedJaggedTensor):
# once per process and command, with nothing a user can do. Dropped here, so worker processes drop it too.
_logging.getLogger("torch.fx._symbolic_trace").addFilter(
    lambda record: not str(record.msg).startswith("is_fx_tracing will return true"))
