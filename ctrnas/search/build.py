"""The `search:` section of a recipe and the one call that turns it into a ready strategy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import ConstraintConfig, Constraints
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig
from ctrnas.search.space_protocol import SearchSpace


@dataclass(frozen=True)
class SearchConfig:
    """strategy picks which sub-config is used; workers > 1 scores in spawned processes; top_k is how many
    of the history's best the final stage retrains from scratch (NASRec/SiGeo: 15)."""

    strategy: Literal["evolution", "random"] = "evolution"
    evolution: EvolutionConfig = EvolutionConfig()
    random: RandomSearchConfig = RandomSearchConfig()
    constraints: ConstraintConfig = ConstraintConfig()
    workers: int = 1
    top_k: int = 15

    def __post_init__(self):
        if self.workers < 1:
            raise RecipeError("search", "workers", f"expected >= 1, got {self.workers}")
        if self.top_k < 1:
            raise RecipeError("search", "top_k", f"expected >= 1, got {self.top_k}")


def make_strategy(
    config: SearchConfig,
    space: SearchSpace,
    *,
    seed: int,
    maximize: bool,
    count_params: Callable[[Any], float] | None = None,
    count_flops: Callable[[Any], float] | None = None,
) -> RegularizedEvolution | RandomSearch:
    """The configured strategy; `maximize` comes from the fitness (proxy: True, validation log loss: False)."""
    constraints = Constraints(config.constraints, count_params, count_flops)
    return build_strategy(config.strategy, space, seed=seed, maximize=maximize, evolution=config.evolution,
                          random=config.random, constraints=constraints)


STRATEGIES = ("evolution", "random")


def build_strategy(
    name: str,
    space: SearchSpace,
    *,
    seed: int,
    maximize: bool,
    evolution: EvolutionConfig = EvolutionConfig(),
    random: RandomSearchConfig = RandomSearchConfig(),
    constraints: Constraints | None = None,
    source: str = "search",
) -> RegularizedEvolution | RandomSearch:
    """The strategy called `name` with its config; the one place a strategy is chosen by name (the CTR
    recipe and the vision harness both come here). `source` names where `name` came from in errors."""
    if name == "evolution":
        return RegularizedEvolution(space, dataclasses.replace(evolution, maximize=maximize), seed=seed,
                                    constraints=constraints)
    if name == "random":
        return RandomSearch(space, dataclasses.replace(random, maximize=maximize), seed=seed,
                            constraints=constraints)
    raise RecipeError(source, "strategy", f"expected one of {', '.join(map(repr, STRATEGIES))}, got {name!r}")
