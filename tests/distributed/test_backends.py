"""Every scoring backend returns the serial search's history for the same seed (issue 8)."""

from __future__ import annotations

import numpy as np
import pytest

from ctrnas.distributed.backends import ProcessBackend, RayBackend, SerialBackend, make_backend
from ctrnas.distributed.search import run_search_on
from ctrnas.errors import RecipeError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.toy import IntVectorSpace, NoisyFitness

CFG = EvolutionConfig(population_size=12, generations=6, tournament_size=6, children_per_generation=4)
SPACE = IntVectorSpace(8, 4)
# Seed-dependent noise: equal histories need equal per-candidate seeds, not only equal architectures.
FIT = NoisyFitness((0, 1, 2, 3, 3, 2, 1, 0), noise=2.0)


def _search(backend):
    with backend:
        return run_search_on(backend, RegularizedEvolution(SPACE, CFG, seed=7), FIT)


def _assert_same(a, b):
    assert len(a.history) == len(b.history) == 12 + 6 * 4
    for ra, rb in zip(a.history, b.history):
        assert ra.same_as(rb), (ra, rb)


@pytest.fixture(scope="module")
def serial():
    return _search(SerialBackend(FIT))


def test_serial_backend_equals_the_search_core_runner(serial):
    reference = RegularizedEvolution(SPACE, CFG, seed=7).run(FIT)
    _assert_same(serial, reference)
    # the scores depend on the per-candidate seed, so equal histories below are not a given
    first = serial.history[0]
    assert FIT(SPACE.sample(np.random.default_rng(0)), first.seed + 1).value != \
        FIT(SPACE.sample(np.random.default_rng(0)), first.seed).value
    assert len({r.seed for r in serial.history}) == len(serial.history)


def test_process_backend_equals_serial(serial):
    _assert_same(_search(ProcessBackend(FIT, workers=2)), serial)


@pytest.mark.slow
def test_ray_backend_local_two_cpus_equals_serial(serial):
    pytest.importorskip("ray")
    backend = RayBackend(FIT, workers=2)
    _assert_same(_search(backend), serial)
    import ray

    assert not ray.is_initialized()  # a private local Ray is shut down on close


def test_unknown_backend_is_a_recipe_error():
    with pytest.raises(RecipeError, match="backend"):
        make_backend("mpi", FIT)
