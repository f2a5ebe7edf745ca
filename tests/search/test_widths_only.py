"""`search.evolution.widths_only` ("structure first, widths second"): every arch the search tries keeps
the blocks of one of its seeds and differs from it in embedding widths alone; a width move is one step."""

import dataclasses

import numpy as np
import pytest

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import Constraints
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.fitness import FitnessResult
from ctrnas.space import get_space

FIELDS = ("C0", "C1", "C2", "C3")
SPACE = get_space({"base": "ctrnas-small", "num_blocks": 3, "dense_dims": [4, 8, 12], "sparse_tokens": [2, 3],
                   "merge_tokens": 2, "emb_dims": [4, 8], "table_dims": [0, 2, 4, 8]}).for_fields(FIELDS, 8)
TABLE_STEPS = {0: (2,), 2: (0, 4), 4: (2, 8), 8: (4,)}  # the neighbours of each width in [0, 2, 4, 8]


def _seed(rng_seed: int = 1):
    arch = SPACE.sample(np.random.default_rng(rng_seed))
    return dataclasses.replace(arch, emb_dim=8, table_dims=(("C0", 2), ("C3", 4)))


def _widths(arch) -> dict[str, int]:
    common = SPACE.common_width(arch)
    return {n: arch.table_width(n, common) for n in FIELDS}


def _structure(arch):
    return arch.blocks, arch.first_order, arch.field_fm


def test_a_width_move_is_one_step_of_one_table_or_of_the_common_width():
    seed, rng = _seed(), np.random.default_rng(0)
    before = _widths(seed)
    common_moves = 0
    for _ in range(200):
        child = SPACE.mutate_widths(seed, rng)
        assert _structure(child) == _structure(seed)
        if SPACE.common_width(child) != 8:
            common_moves += 1  # 8 -> 4: the tables wider than 4 take 4, the narrower keep theirs
            assert SPACE.common_width(child) == 4
            assert _widths(child) == {n: min(w, 4) for n, w in before.items()}
            continue
        moved = {n: (before[n], w) for n, w in _widths(child).items() if w != before[n]}
        assert len(moved) == 1
        (old, new), = moved.values()
        assert new in TABLE_STEPS[old]
    assert 0 < common_moves < 100  # one move in five (four tables and the common width) on average


def test_width_neighbours_are_the_local_neighbours_that_keep_the_blocks():
    seed = _seed()
    near = SPACE.width_neighbours(seed)
    # by hand: C0 at 2 -> 0 or 4; C1 and C2 at 8 -> 4; C3 at 4 -> 2 or 8; the common width 8 -> 4
    assert len(near) == 7
    assert all(_structure(a) == _structure(seed) for a in near)
    assert len({a.key() for a in near}) == 7 and seed.key() not in {a.key() for a in near}
    assert any(_structure(a) != _structure(seed) for a in SPACE.local_neighbours(seed))


def _run(widths_only: bool, sweep: bool = False, seed: int = 0) -> list:
    cfg = EvolutionConfig(population_size=8, generations=5, tournament_size=4, children_per_generation=4,
                          local_share=0.5, local_sweep=sweep, widths_only=widths_only)
    evo = RegularizedEvolution(SPACE, cfg, seed=seed, constraints=Constraints(), initial=(_seed(1), _seed(2)))
    tried, rng = [], np.random.default_rng(seed)
    while not evo.done:
        cands = evo.ask()
        tried += [c.arch for c in cands]
        evo.tell(cands, [FitnessResult(float(rng.normal())) for _ in cands])
    return tried


@pytest.mark.parametrize("sweep", [False, True])
def test_every_arch_of_a_widths_only_search_has_a_seeds_blocks(sweep):
    seeds = {_structure(_seed(1)), _structure(_seed(2))}
    tried = _run(True, sweep)
    assert len(tried) == 8 + 5 * 4 and len({a.key() for a in tried}) == len(tried)
    assert all(_structure(a) in seeds for a in tried)
    # the same search without the option tries other blocks (random draws and mutants)
    assert sum(_structure(a) not in seeds for a in _run(False, sweep)) > 10


def test_widths_only_needs_seeds():
    with pytest.raises(RecipeError, match="widths_only"):
        RegularizedEvolution(SPACE, EvolutionConfig(population_size=4, tournament_size=2, widths_only=True))
