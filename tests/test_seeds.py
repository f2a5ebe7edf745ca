"""One seed derivation for the CTR search (candidates) and the vision harness (cells)."""

import numpy as np

from ctrnas.search.fitness import candidate_seed
from ctrnas.seeds import derive_seed
from ctrnas.vision.correlate import cell_seed


def test_ctr_candidates_and_vision_cells_derive_seeds_alike():
    for seed in (0, 1, 7, 2**31 - 1):
        for index in (0, 1, 2, 15624):
            want = derive_seed(seed, index)
            assert candidate_seed(seed, index) == cell_seed(seed, index) == want
            # numpy's SeedSequence hashing of the (seed, index) entropy pair, first 32-bit word
            assert want == np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0]


def test_derived_seeds_are_32_bit_and_distinct_per_index():
    seeds = [derive_seed(3, i) for i in range(2000)]
    assert len(set(seeds)) == 2000 and all(0 <= s < 2**32 for s in seeds)
    assert derive_seed(3, 1) != derive_seed(4, 1)
