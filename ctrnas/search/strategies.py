"""The search strategies by name: what `search.strategy` in a recipe, `make_strategy`/`build_strategy` and the
vision harness's `--strategy` read, so no caller branches on a strategy's name.

A strategy registers its name, its config class (a frozen dataclass: `search.<name>` of a recipe when
`SearchConfig` has that field, else its defaults) and a builder. The builder is called as
`build(space, settings, *, seed, maximize, constraints, initial, rungs, rung_maximize)`, where
`settings(name)` is the config of the strategy called `name` (a strategy may build on another's, as
multi-fidelity builds on evolution). `by_rungs`: it scores candidates rung by rung (its fitness takes a
budget), so the caller builds a ladder of fitnesses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ctrnas.errors import RecipeError
from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
from ctrnas.search.constraints import Constraints
from ctrnas.search.multifidelity import MultiFidelity, MultiFidelityConfig, RungConfig
from ctrnas.search.random_search import RandomSearch, RandomSearchConfig
from ctrnas.search.space_protocol import SearchSpace


@dataclass(frozen=True)
class StrategyEntry:
    name: str
    config: type
    build: Callable[..., Any]
    by_rungs: bool = False


_STRATEGIES: dict[str, StrategyEntry] = {}


def register_strategy(entry: StrategyEntry) -> StrategyEntry:
    """Make `entry` known by its name (a second strategy under a taken name is an error)."""
    if entry.name in _STRATEGIES and _STRATEGIES[entry.name] != entry:
        raise RecipeError("search", "strategy", f"strategy name {entry.name!r} registered twice")
    _STRATEGIES[entry.name] = entry
    return entry


def strategy_names(by_rungs: bool | None = None) -> tuple[str, ...]:
    """The known strategies in registration order; `by_rungs` True/False: only those that do / do not score
    rung by rung."""
    return tuple(n for n, e in _STRATEGIES.items() if by_rungs is None or e.by_rungs == by_rungs)


def get_strategy(name: str, source: str = "search") -> StrategyEntry:
    """The strategy called `name`; an unknown one is a RecipeError naming `source` and the known names."""
    if name not in _STRATEGIES:
        raise RecipeError(source, "strategy", f"expected one of {', '.join(map(repr, _STRATEGIES))}, got {name!r}")
    return _STRATEGIES[name]


def _evolution(space: SearchSpace, settings: Callable[[str], Any], *, seed: int, maximize: bool,
               constraints: Constraints | None, initial: tuple[Any, ...], **_: Any) -> RegularizedEvolution:
    return RegularizedEvolution(space, dataclasses.replace(settings("evolution"), maximize=maximize), seed=seed,
                                constraints=constraints, initial=initial)


def _random(space: SearchSpace, settings: Callable[[str], Any], *, seed: int, maximize: bool,
            constraints: Constraints | None, **_: Any) -> RandomSearch:
    return RandomSearch(space, dataclasses.replace(settings("random"), maximize=maximize), seed=seed,
                        constraints=constraints)


def _multifidelity(space: SearchSpace, settings: Callable[[str], Any], *, seed: int, maximize: bool,
                   constraints: Constraints | None, initial: tuple[Any, ...], rungs: tuple[RungConfig, ...],
                   rung_maximize: list[bool] | None, **_: Any) -> MultiFidelity:
    rungs = rungs or settings("multifidelity").rungs
    evolution = _evolution(space, settings, seed=seed, maximize=maximize, constraints=constraints, initial=initial)
    return MultiFidelity(evolution, rungs, rung_maximize if rung_maximize is not None else [maximize] * len(rungs),
                         settings("multifidelity").promotion)


register_strategy(StrategyEntry("evolution", EvolutionConfig, _evolution))
register_strategy(StrategyEntry("random", RandomSearchConfig, _random))
register_strategy(StrategyEntry("multifidelity", MultiFidelityConfig, _multifidelity, by_rungs=True))
