"""A fresh supernet from a seed: the one place ctrnas draws one (kept apart from `io`, which loads and saves,
so `widths` can build one without importing the export and io modules that import it)."""

from __future__ import annotations

import torch


def build_supernet(schema, space, seed: int | None, emb_dim: int | None = None, row_cap: int | None = None):
    """A new supernet with weights drawn from `seed` (None: from the global RNG's current state); either way the
    caller's global RNG is left as it was. Every fresh supernet of ctrnas is made here, so the same seed gives
    the same weights in the pipeline, the CLI verbs and the final stage's export template."""
    from ctrnas.supernet.supernet import Supernet

    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return Supernet(schema, space, emb_dim=emb_dim, row_cap=row_cap)
