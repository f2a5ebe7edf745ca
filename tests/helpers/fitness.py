"""A toy fitness with a budget, module-level so spawned scoring workers can import it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctrnas.search.fitness import FitnessResult


@dataclass(frozen=True)
class BudgetNoise:
    """sum(arch) + seeded noise that shrinks with the budget (as an estimate from more batches would)."""

    default_budget: int = 4

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        budget = self.default_budget if budget is None else budget
        noise = float(np.random.default_rng(seed).normal()) / budget
        return FitnessResult(float(sum(arch.values)) + noise, {"noise": noise}, {"budget": budget})
