"""A fresh supernet from a seed: the one place ctrnas draws one (kept apart from `io`, which loads and saves,
so `widths` can build one without importing the export and io modules that import it)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode

# the in-place random fills of torch and of torch.nn.init (each takes the tensor first)
_DRAWS = frozenset({"uniform_", "normal_", "trunc_normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_",
                    "xavier_normal_", "orthogonal_", "sparse_", "bernoulli_", "exponential_", "geometric_",
                    "log_normal_", "cauchy_", "random_"})


class _ZerosForDraws(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in _DRAWS:
            tensor = args[0] if args else kwargs["tensor"]
            with torch.no_grad():
                return tensor.zero_()
        return func(*args, **kwargs)


@contextmanager
def undrawn() -> Iterator[None]:
    """Modules built inside get zeros where they would draw random weights (the global RNG is not touched):
    for weights that are all replaced afterwards, by a checkpoint or by `export(init="fresh")`. Drawing is
    most of the time it takes to build a supernet (tens of millions of weights, twice for `nn.Linear`)."""
    with torch.random.fork_rng(devices=[]), _ZerosForDraws():  # a draw it does not know stays off the caller's RNG
        yield


def build_supernet(schema, space, seed: int | None, emb_dim: int | None = None, row_cap: int | None = None,
                   drawn: bool = True):
    """A new supernet with weights drawn from `seed` (None: from the global RNG's current state); either way the
    caller's global RNG is left as it was. Every fresh supernet of ctrnas is made here, so the same seed gives
    the same weights in the pipeline, the CLI verbs and the final stage's export template. `drawn=False`: its
    weights are zeros (see `undrawn`), for a caller that replaces all of them; `seed` is then unused."""
    from ctrnas.supernet.supernet import Supernet

    if not drawn:
        with undrawn():
            return Supernet(schema, space, emb_dim=emb_dim, row_cap=row_cap)
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return Supernet(schema, space, emb_dim=emb_dim, row_cap=row_cap)
