"""The paper's spaces stay the paper's spaces whatever ops are added: op sets and sampled archs pinned.

The hashes were recorded on main before the op table existed (sha256 of the canonical arch JSON of the
first arch drawn from `default_rng(2024)`, and of that arch after 20 mutations drawn from `default_rng(7)`).
"""

import hashlib

import numpy as np
import pytest

from ctrnas.space import get_space

PINNED = {
    "nasrec-small": (("fc", "dot"), ("efc",), "426eb3d936ac8309", "8739e5a27c07ef9c", "daa77d2d0502aaf8"),
    "nasrec-full": (("fc", "sum", "gating", "dot"), ("efc", "attention"), "fdb44215444f4275", "2f27a3680dddbde5",
                    "0d3b8297140ae5e5"),
}


def _sha(arch) -> str:
    return hashlib.sha256(arch.dumps().encode()).hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_paper_presets_keep_their_ops_and_sampled_archs(name):
    dense, sparse, sampled, key, mutated = PINNED[name]
    space = get_space(name)
    assert (space.config.dense_ops, space.config.sparse_ops) == (dense, sparse)
    arch = space.sample(np.random.default_rng(2024))
    assert (_sha(arch), arch.key()) == (sampled, key)
    rng = np.random.default_rng(7)
    for _ in range(20):
        arch = space.mutate(arch, rng)
    assert _sha(arch) == mutated
