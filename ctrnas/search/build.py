"""The `search:` section of a recipe and the one call that turns it into a ready strategy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Literal

from ctrnas.errors import RecipeError
from ctrnas.search.constraints import ConstraintConfig, Constraints
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.multifidelity import MultiFidelity, RungConfig
from ctrnas.search.predictor import Predictor, PredictorConfig
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig
from ctrnas.search.space_protocol import SearchSpace


@dataclass(frozen=True)
class MultiFidelityConfig:
    """The rungs of `strategy: multifidelity` (regularized evolution with successive halving, see
    `multifidelity`), cheapest first; empty: the caller's default ladder (the CTR pipeline's is in
    `ctrnas.pipeline.fitness.rungs`). Evolution's settings come from `search.evolution`."""

    rungs: tuple[RungConfig, ...] = ()


@dataclass(frozen=True)
class SearchConfig:
    """strategy picks which sub-config is used; workers > 1 scores in spawned processes; top_k is how many
    of the history's best the final stage retrains from scratch (NASRec/SiGeo: 15). seed_population: the
    space's hand-designed baseline archs start evolution's initial population (those that fit the space)."""

    strategy: Literal["evolution", "random", "multifidelity"] = "evolution"
    evolution: EvolutionConfig = EvolutionConfig()
    random: RandomSearchConfig = RandomSearchConfig()
    multifidelity: MultiFidelityConfig = MultiFidelityConfig()
    constraints: ConstraintConfig = ConstraintConfig()
    # predictor-guided evolution (evolution and multifidelity): `pool` mutants per child, a random forest
    # on the arch's features and zero-cost proxies picks which are scored (ctrnas.search.predictor)
    predictor: PredictorConfig = PredictorConfig()
    workers: int = 1
    top_k: int = 15
    seed_population: bool = True

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
    initial: tuple = (),
    rungs: tuple[RungConfig, ...] = (),
    rung_maximize: list[bool] | None = None,
    featurize: Callable[[Any], dict] | None = None,
) -> RegularizedEvolution | RandomSearch | MultiFidelity:
    """The configured strategy; `maximize` comes from the fitness (proxy: True, validation log loss: False).
    `initial`: archs evolution's initial population starts with (used when `config.seed_population`).
    multifidelity: `rungs` (default `config.multifidelity.rungs`) and each rung's direction.
    `featurize(arch) -> {name: value}`: the predictor's inputs (needed when `config.predictor.pool` is set)."""
    constraints = Constraints(config.constraints, count_params, count_flops)
    initial = tuple(initial) if config.seed_population else ()
    multi = config.strategy == "multifidelity"
    if multi:
        rungs = rungs or config.multifidelity.rungs
        rung_maximize = rung_maximize if rung_maximize is not None else [maximize] * len(rungs)
    predictor = None
    if config.predictor.pool and config.strategy != "random":
        if featurize is None:
            raise RecipeError("search", "predictor.pool", "this caller gives the predictor no features")
        predictor = Predictor(config.predictor, featurize, rung_maximize if multi else [maximize], seed)
    if multi:
        evolution = build_strategy("evolution", space, seed=seed, maximize=maximize, evolution=config.evolution,
                                   constraints=constraints, initial=initial)
        evolution.predictor = predictor
        return MultiFidelity(evolution, rungs, rung_maximize)
    strategy = build_strategy(config.strategy, space, seed=seed, maximize=maximize, evolution=config.evolution,
                              random=config.random, constraints=constraints, initial=initial)
    if predictor is not None:
        strategy.predictor = predictor
    return strategy


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
    initial: tuple = (),
) -> RegularizedEvolution | RandomSearch:
    """The strategy called `name` with its config; the one place a strategy is chosen by name (the CTR
    recipe and the vision harness both come here). `source` names where `name` came from in errors; `initial`
    seeds evolution's population. `multifidelity` needs rungs and is made by `make_strategy`."""
    if name == "evolution":
        return RegularizedEvolution(space, dataclasses.replace(evolution, maximize=maximize), seed=seed,
                                    constraints=constraints, initial=initial)
    if name == "random":
        return RandomSearch(space, dataclasses.replace(random, maximize=maximize), seed=seed,
                            constraints=constraints)
    raise RecipeError(source, "strategy", f"expected one of {', '.join(map(repr, STRATEGIES))}, got {name!r}")
