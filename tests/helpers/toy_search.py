"""A toy integer-vector space with a separable fitness whose optimum is known, for the search tests.

Module-level, so spawned scoring workers unpickle it by module name (they inherit the test's `sys.path`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctrnas.search.fitness import FitnessResult


@dataclass(frozen=True)
class IntVector:
    """An architecture of the toy space: one integer choice per position."""

    values: tuple[int, ...]

    def key(self) -> str:
        return "-".join(map(str, self.values))

    def to_json(self) -> dict:
        return {"values": list(self.values)}


@dataclass(frozen=True)
class IntVectorSpace:
    """`length` positions, each with `choices` values 0..choices-1 (choices**length architectures)."""

    length: int = 8
    choices: int = 4

    def sample(self, rng: np.random.Generator) -> IntVector:
        return IntVector(tuple(int(v) for v in rng.integers(0, self.choices, size=self.length)))

    def mutate(self, arch: IntVector, rng: np.random.Generator) -> IntVector:
        # Always a different value: a no-op mutation would only cost a de-duplication retry here.
        pos = int(rng.integers(self.length))
        new = (arch.values[pos] + 1 + int(rng.integers(self.choices - 1))) % self.choices
        values = list(arch.values)
        values[pos] = new
        return IntVector(tuple(values))


@dataclass(frozen=True)
class SeparableFitness:
    """value = -sum_i (v_i - target_i)^2, maximal (0) exactly at `target`; terms hold the per-position error.

    `nan_keys` makes chosen architectures score NaN, to exercise the ranking of non-finite scores.
    """

    target: tuple[int, ...]
    nan_keys: frozenset[str] = frozenset()

    def __call__(self, arch: IntVector, seed: int = 0) -> FitnessResult:
        if arch.key() in self.nan_keys:
            return FitnessResult(math.nan, {"sq_error": math.nan})
        err = float(sum((v - t) ** 2 for v, t in zip(arch.values, self.target)))
        return FitnessResult(-err, {"sq_error": err}, {"seed": seed})


@dataclass(frozen=True)
class NoisyFitness:
    """The separable fitness plus seed-driven noise: equal results need equal per-candidate seeds."""

    target: tuple[int, ...]
    noise: float = 0.5

    def __call__(self, arch: IntVector, seed: int = 0) -> FitnessResult:
        base = SeparableFitness(self.target)(arch).value
        eps = float(np.random.default_rng(seed).normal(0.0, self.noise))
        return FitnessResult(base + eps, {"noise": eps})


def vector_sum(arch: IntVector) -> float:
    """A stand-in resource counter (like a parameter count): the sum of the choices."""
    return float(sum(arch.values))


@dataclass(frozen=True)
class NoisyFidelityFitness:
    """A multi-fidelity toy: the separable fitness plus seed-driven noise of standard deviation
    `noise / sqrt(budget)`, so a larger budget measures the true value more exactly (as a longer training
    does). fitness(arch, seed, budget); `default_budget` 1."""

    target: tuple[int, ...]
    noise: float = 1.0
    default_budget: int = 1

    def sigma(self, budget: int) -> float:
        return self.noise / math.sqrt(budget)

    def __call__(self, arch: IntVector, seed: int = 0, budget: int | None = None) -> FitnessResult:
        budget = self.default_budget if budget is None else budget
        base = SeparableFitness(self.target)(arch).value
        eps = float(np.random.default_rng(seed).normal(0.0, self.sigma(budget)))
        return FitnessResult(base + eps, {"noise": eps, "true": base}, {"budget": budget})
