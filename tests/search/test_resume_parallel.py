"""Resume from a checkpoint and parallel scoring both reproduce the uninterrupted serial search."""

import pytest

from ctrnas.search.checkpoint import CheckpointError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVectorSpace, NoisyFitness

CFG = EvolutionConfig(population_size=16, generations=12, tournament_size=8, children_per_generation=4)
SPACE = IntVectorSpace(8, 4)
# Seed-dependent noise: equal histories require equal per-candidate seeds, not only equal architectures.
FIT = NoisyFitness((0, 1, 2, 3, 3, 2, 1, 0), noise=2.0)


class Crash(Exception):
    pass


class CrashAfter:
    """Scores like FIT, then raises on call number `n` (a killed worker, a pre-empted job)."""

    def __init__(self, n):
        self.n, self.calls = n, 0

    def __call__(self, arch, seed):
        self.calls += 1
        if self.calls == self.n:
            raise Crash()
        return FIT(arch, seed)


def assert_same_search(a, b):
    assert len(a.history) == len(b.history)
    for ra, rb in zip(a.history, b.history):
        assert ra.same_as(rb), (ra, rb)
    assert a.best.same_as(b.best)


@pytest.mark.parametrize("crash_at", [10, 16 + 4 * 5 + 2])  # in the initial population; mid generation 6
def test_resumed_evolution_ends_with_identical_history(tmp_path, crash_at):
    reference = RegularizedEvolution(SPACE, CFG, seed=7).run(FIT)
    ckpt = tmp_path / "search.ckpt"
    with pytest.raises(Crash):
        RegularizedEvolution(SPACE, CFG, seed=7).run(CrashAfter(crash_at), checkpoint_path=ckpt)
    assert ckpt.exists() == (crash_at > 16)
    fresh = CrashAfter(10**9)
    resumed = RegularizedEvolution(SPACE, CFG, seed=7).run(fresh, checkpoint_path=ckpt)
    assert_same_search(reference, resumed)
    # Only the unfinished generation and the ones after it are scored again.
    done_before = 0 if crash_at <= 16 else 16 + 4 * ((crash_at - 1 - 16) // 4)
    assert fresh.calls == len(reference.history) - done_before


def test_resumed_random_search_ends_with_identical_history(tmp_path):
    cfg = RandomSearchConfig(budget=30, batch_size=4)
    reference = RandomSearch(SPACE, cfg, seed=3).run(FIT)
    ckpt = tmp_path / "rs.ckpt"
    with pytest.raises(Crash):
        RandomSearch(SPACE, cfg, seed=3).run(CrashAfter(15), checkpoint_path=ckpt)
    assert_same_search(reference, RandomSearch(SPACE, cfg, seed=3).run(FIT, checkpoint_path=ckpt))


def test_finished_checkpoint_resumes_to_the_same_result_without_scoring(tmp_path):
    ckpt = tmp_path / "search.ckpt"
    first = RegularizedEvolution(SPACE, CFG, seed=1).run(FIT, checkpoint_path=ckpt)
    counter = CrashAfter(10**9)
    again = RegularizedEvolution(SPACE, CFG, seed=1).run(counter, checkpoint_path=ckpt)
    assert counter.calls == 0
    assert_same_search(first, again)


def test_checkpoint_of_another_setup_is_refused(tmp_path):
    ckpt = tmp_path / "search.ckpt"
    RegularizedEvolution(SPACE, CFG, seed=1).run(FIT, checkpoint_path=ckpt)
    with pytest.raises(CheckpointError, match="different search setup"):
        RegularizedEvolution(SPACE, CFG, seed=2).run(FIT, checkpoint_path=ckpt)


def test_parallel_scoring_equals_serial():
    serial = RegularizedEvolution(SPACE, CFG, seed=5).run(FIT, workers=1)
    parallel = RegularizedEvolution(SPACE, CFG, seed=5).run(FIT, workers=2)
    assert_same_search(serial, parallel)
    assert len({r.seed for r in serial.history}) == len(serial.history)
