"""Proxy-driven search in NB201: `ctrnas.search` strategies with a proxy as fitness over the 15,625 cells.

The fitness of a cell is the proxy score of the cell's network at initial weights seeded by
(seed, cell index) on fixed seeded batches, exactly as the correlation harness scores it, so the score
is a function of the cell alone: a cache (or the harness's CSV) can stand in for re-scoring.
The outcome is judged by NB201's true accuracy of the chosen cell, against the best cell and against
random choice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ctrnas.device import configure, resolve_device
from ctrnas.vision.cifar import batches_to, make_batches, nhwc_for
from ctrnas.vision.correlate import ONE_ROW, cell_seed, proxy_for, read_rows
from ctrnas.vision.network import build_network
from ctrnas.vision.space import NB201Cell, NB201Space, NB201Table


class ProxyFitness:
    """`fitness(cell, seed) -> FitnessResult`: one proxy on one seeded initialisation of the cell's network."""

    def __init__(self, proxy: str, images: torch.Tensor, labels: torch.Tensor, *, num_classes: int = 10,
                 batch_size: int = 64, k: int = 4, seed: int = 0, channels_last: bool | None = None,
                 warmup: float = 0.0, device: str | torch.device = "cpu"):
        self.device = resolve_device(device)
        configure(self.device)
        self.proxy_name, self.num_classes, self.seed = proxy, num_classes, seed
        self.channels_last = nhwc_for(channels_last, self.device)
        self.proxy = proxy_for(proxy, warmup)
        self.batches = batches_to(make_batches(images, labels, batch_size, k, torch.Generator().manual_seed(seed)),
                                  self.device, self.channels_last)
        if proxy in ONE_ROW:
            self.batches = [((self.batches[0][0][0][:1],), self.batches[0][1][:1])]

    def __call__(self, cell: NB201Cell, seed: int):
        from ctrnas.search.fitness import FitnessResult

        # The candidate seed is ignored on purpose: one cell, one score, whoever proposes it.
        model = build_network(cell, self.num_classes, seed=cell_seed(self.seed, cell.index)).to(self.device)
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        r = self.proxy.score(model, self.batches, F.cross_entropy)
        return FitnessResult(r.value, dict(r.terms), {"time_s": r.meta["time_s"]})


def cache_from_csv(paths: list[str | Path], proxy: str, warmup: float = 0.0):
    """A `ScoreCache` pre-filled with the harness's scores of `proxy` (same seed => the same values)."""
    from ctrnas.search.fitness import FitnessResult, ScoreCache

    entries = {}
    for path in paths:
        for r in read_rows(path):
            if r["proxy"] == proxy and float(r["warmup"]) == warmup:
                entries[r["arch"]] = FitnessResult(float(r["value"]), json.loads(r["terms"]), {"from_csv": str(path)})
    return ScoreCache(entries)


@dataclass(frozen=True)
class SearchOutcome:
    """One search: the chosen cell, its true accuracy, and the comparison points."""

    seed: int
    strategy: str
    chosen: str
    chosen_accuracy: float
    evaluations: int
    scored: int
    random_choice_accuracy: float  # a cell drawn uniformly with the same seed
    best_accuracy: float


def run_search(
    fitness, table: NB201Table, *, strategy: str = "evolution", seed: int = 0, population: int = 16,
    generations: int = 10, tournament: int = 4, children: int = 4, budget: int | None = None,
    truth: str = "cifar10", cache=None, progress: bool = False,
) -> SearchOutcome:
    """Evolution (Real et al. 2019, aging) or random search over NB201 with `fitness`; judge by NB201 truth."""
    from ctrnas.search.build import build_strategy
    from ctrnas.search.evolution import EvolutionConfig
    from ctrnas.search.random_search import RandomSearchConfig

    space = NB201Space()
    # each strategy reads its own config (`ctrnas.search.strategies`); the others' are unused
    n = budget if budget is not None else population + generations * children
    configs = {"evolution": EvolutionConfig(population_size=population, generations=generations,
                                            tournament_size=tournament, children_per_generation=children),
               "random": RandomSearchConfig(budget=n, batch_size=children)}
    strat = build_strategy(strategy, space, seed=seed, maximize=True, configs=configs, source="vision search")
    result = strat.run(fitness, cache=cache, progress=progress)
    best = result.best
    chosen = NB201Cell.from_str(best.key)
    random_cell = space.sample(np.random.default_rng([seed, 1]))
    return SearchOutcome(
        seed=seed, strategy=strategy, chosen=best.key, chosen_accuracy=table.accuracy(chosen, truth),
        evaluations=len(result.history), scored=sum(not h.cached for h in result.history),
        random_choice_accuracy=table.accuracy(random_cell, truth), best_accuracy=table.best(truth)[1],
    )
