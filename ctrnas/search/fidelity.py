"""What a multi-fidelity search asks a fitness for: a rung and that rung's budget.

A multi-fidelity search scores a candidate at several fidelities (rungs), each possibly with another
fitness (a proxy, a fine-tuning, a short training). `Ladder` bundles one fitness per rung into the single
callable the runner ships to its workers; the runner passes it a `Fidelity` as the budget, so the score
cache keeps the rungs apart, and records the rung and the budget in the history.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from ctrnas.search.fitness import FitnessResult, call_fitness


@dataclass(frozen=True)
class Fidelity:
    """Rung `rung` (0 = the cheapest) with `budget` in that rung's fitness's own unit; `parent`: the key of
    the arch the candidate was mutated from ("" for a seed or random draw), for a rung that starts a child
    from its line's trained weights. It is not part of the score cache's key: an arch is scored once."""

    rung: int
    budget: int | None
    parent: str = field(default="", compare=False)


@dataclass(frozen=True)
class Ladder:
    """fitness(arch, seed, Fidelity(r, b)) = fitnesses[r](arch, seed, b): one fitness per rung. A rung's
    fitness with `takes_parent` also gets the candidate's parent: fitnesses[r](arch, seed, b, parent=...)."""

    fitnesses: tuple[Callable[..., Any], ...]

    def __call__(self, arch: Any, seed: int, budget: Fidelity) -> FitnessResult:
        if not isinstance(budget, Fidelity) or not 0 <= budget.rung < len(self.fitnesses):
            raise ValueError(f"a ladder of {len(self.fitnesses)} rungs needs a Fidelity budget, got {budget!r}")
        fitness = self.fitnesses[budget.rung]
        if getattr(fitness, "takes_parent", False):
            return call_fitness(functools.partial(fitness, parent=budget.parent), arch, seed, budget.budget)
        return call_fitness(fitness, arch, seed, budget.budget)
