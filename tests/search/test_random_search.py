"""Random search: reproducible for a seed, distinct candidates, exact budget."""

from ctrnas.search.random_search import RandomSearch, RandomSearchConfig

from tests.helpers.toy_search import IntVectorSpace, NoisyFitness

SPACE = IntVectorSpace(8, 4)
FIT = NoisyFitness((1,) * 8)


def test_same_seed_and_budget_reproduce_the_history():
    cfg = RandomSearchConfig(budget=37, batch_size=5)
    a = RandomSearch(SPACE, cfg, seed=11).run(FIT)
    b = RandomSearch(SPACE, cfg, seed=11).run(FIT)
    c = RandomSearch(SPACE, cfg, seed=12).run(FIT)
    assert a.history.same_as(b.history)
    assert [r.key for r in a.history] != [r.key for r in c.history]


def test_budget_is_exact_and_candidates_distinct():
    result = RandomSearch(SPACE, RandomSearchConfig(budget=37, batch_size=5), seed=0).run(FIT)
    assert len(result.history) == 37
    assert len({r.key for r in result.history}) == 37
    # Batches of 5 -> generations 0..7, the last one holding the remaining 2.
    assert [r.generation for r in result.history] == [i // 5 for i in range(37)]


def test_tiny_space_is_enumerated_before_anything_repeats():
    space = IntVectorSpace(2, 3)  # 9 architectures
    result = RandomSearch(space, RandomSearchConfig(budget=9, batch_size=9, max_dedup_tries=1000), seed=0).run(FIT)
    assert sorted(r.key for r in result.history) == sorted(f"{a}-{b}" for a in range(3) for b in range(3))
