"""A resumed search says, in one line on stderr, how far it had got."""

import pytest

from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVectorSpace, NoisyFitness

CFG = EvolutionConfig(population_size=16, generations=12, tournament_size=8, children_per_generation=4)
SPACE = IntVectorSpace(8, 4)
FIT = NoisyFitness((0, 1, 2, 3, 3, 2, 1, 0), noise=2.0)


class Crash(Exception):
    pass


def crash_after(n):
    calls = []

    def fit(arch, seed):
        calls.append(1)
        if len(calls) == n:
            raise Crash()
        return FIT(arch, seed)

    return fit


def _resumed_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("search: resumed")]


def test_a_resumed_evolution_names_the_next_generation(tmp_path, capsys):
    ckpt = tmp_path / "search.ckpt"
    with pytest.raises(Crash):  # mid generation 6: generations 0 (16 random) to 5 (4 children each) are saved
        RegularizedEvolution(SPACE, CFG, seed=7).run(crash_after(16 + 4 * 5 + 2), checkpoint_path=ckpt)
    assert _resumed_lines(capsys.readouterr().err) == []
    RegularizedEvolution(SPACE, CFG, seed=7).run(FIT, checkpoint_path=ckpt)
    assert _resumed_lines(capsys.readouterr().err) == [
        f"search: resumed from {ckpt}: generation 6 of 12 next (36 of 64 evaluations done)"]
    RegularizedEvolution(SPACE, CFG, seed=7).run(FIT, checkpoint_path=ckpt)
    assert _resumed_lines(capsys.readouterr().err) == [
        f"search: resumed from {ckpt}: already finished (64 of 64 evaluations done)"]


def test_a_resumed_random_search_counts_evaluations(tmp_path, capsys):
    ckpt = tmp_path / "rs.ckpt"
    cfg = RandomSearchConfig(budget=30, batch_size=4)
    with pytest.raises(Crash):  # in the 4th batch of 4: three batches saved
        RandomSearch(SPACE, cfg, seed=3).run(crash_after(15), checkpoint_path=ckpt)
    RandomSearch(SPACE, cfg, seed=3).run(FIT, checkpoint_path=ckpt)
    assert _resumed_lines(capsys.readouterr().err) == [f"search: resumed from {ckpt}: 12 of 30 evaluations done"]
