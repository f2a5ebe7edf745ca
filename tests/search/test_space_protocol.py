"""The project's real spaces satisfy the search protocol and survive a checkpointed search."""

import hashlib

import numpy as np
import pytest

from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.space_protocol import Arch, SearchSpace, arch_key, default_to_json

from tests.helpers.toy_search import IntVector, IntVectorSpace

CFG = EvolutionConfig(population_size=12, generations=4, tournament_size=6, children_per_generation=4)


def real_spaces():
    spaces = [IntVectorSpace()]
    try:
        from ctrnas.space import get_space

        spaces.append(get_space("nasrec-small"))
    except ImportError:
        pass
    try:
        from ctrnas.vision.space import NB201Space

        spaces.append(NB201Space())
    except (ImportError, TypeError):
        pass
    return spaces


@pytest.mark.parametrize("space", real_spaces(), ids=lambda s: type(s).__module__)
def test_space_searches_and_resumes(space, tmp_path):
    assert isinstance(space, SearchSpace)
    a = space.sample(np.random.default_rng(0))
    assert isinstance(a, Arch) and arch_key(a) == arch_key(space.sample(np.random.default_rng(0)))
    # Any deterministic score of the key will do.
    fit = lambda arch, seed: float(int(hashlib.sha1(arch_key(arch).encode()).hexdigest()[:8], 16) % 997)

    reference = RegularizedEvolution(space, CFG, seed=0).run(fit)
    keys = [r.key for r in reference.history]
    assert len(keys) == len(set(keys)) == 12 + 4 * 4
    calls = []

    def crashing(arch, seed):  # dies in generation 2: the checkpoint holds real archs of this space
        calls.append(1)
        if len(calls) == 12 + 4 + 2:
            raise KeyboardInterrupt
        return fit(arch, seed)

    ckpt = tmp_path / "c.pkl"
    with pytest.raises(KeyboardInterrupt):
        RegularizedEvolution(space, CFG, seed=0).run(crashing, checkpoint_path=ckpt)
    assert RegularizedEvolution(space, CFG, seed=0).run(fit, checkpoint_path=ckpt).history.same_as(reference.history)


def test_default_to_json_prefers_the_arch_own_encoding():
    assert default_to_json(IntVector((1, 2))) == {"values": [1, 2]}

    class KeyOnly:
        def key(self):
            return "k"

    assert default_to_json(KeyOnly()) == "k"
    with pytest.raises(TypeError):
        arch_key(type("Bad", (), {"key": lambda self: 3})())
