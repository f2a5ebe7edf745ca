"""One way to derive seeds: a child seed from a parent seed and an index (a candidate's evaluation number,
a cell's index, ...), so each item gets its own stream, fixed by (seed, index) alone: the same numbers
serially, in worker processes, after a resume, and in the CTR search and the vision harness alike."""

from __future__ import annotations

import numpy as np


def derive_seed(seed: int, *index: int) -> int:
    """A 32-bit seed for item `index` under `seed` (numpy's SeedSequence hashing of the pair)."""
    return int(np.random.SeedSequence([seed, *index]).generate_state(1, dtype=np.uint32)[0])
