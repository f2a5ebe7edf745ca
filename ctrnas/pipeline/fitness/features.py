"""What the search's predictor reads of a CTR arch (`search.predictor`): its readable features
(`ctrnas.space.features`, the GRAF role), parameters, FLOPs, embedding width, and zero-cost proxies with
their terms, scored on the warmed-up supernet exactly as a proxy rung scores them. The predictor learns
their signs and weights from the rung results, so a proxy that ranks backwards on this data still helps."""

from __future__ import annotations

import dataclasses

from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe


class CtrFeatures:
    """featurize(arch) -> {name: value} for `ctrnas.search.predictor.Predictor` (main process only)."""

    def __init__(self, recipe: Recipe, data: DataResult, supernet, proxies: tuple[str, ...]):
        from ctrnas.pipeline.fitness.build import bytes_counter, make_fitness, resource_counters

        self.count_params, self.count_flops = resource_counters(recipe, data)
        self.count_bytes = bytes_counter(recipe, data) if recipe.space.table_dims else None
        self.fields = recipe.search_space(data.schema).config.tables
        self.width, self.seed = recipe.train.embedding_dim, recipe.seed
        self.fitnesses = {}
        for name in proxies:
            options = recipe.proxy.options if name == recipe.proxy.name else {}
            self.fitnesses[name], _ = make_fitness(recipe, data, supernet, "proxy", proxy=name,
                                                   proxy_options=options)

    def __call__(self, arch) -> dict[str, float]:
        from ctrnas.space.features import arch_features

        out = {f"arch: {k}": float(v) for k, v in arch_features(arch).items()}
        out["params"] = self.count_params(arch)
        out["flops"] = self.count_flops(arch)
        out["embedding width"] = float(arch.emb_dim or self.width)
        if self.count_bytes is not None:  # per-table widths: the tables' size, and each field's width (the
            # forest's importances then say which fields the score follows: the ones worth their bytes)
            out["embedding MB"] = self.count_bytes(arch) / 1e6
            common = arch.emb_dim or self.width
            out.update({f"width {n}": arch.table_width(n, common) / common for n in self.fields})
        # the supernet's tables have the run's width: a wider or narrower arch is scored at that width (its
        # tables at most that wide)
        at_run_width = dataclasses.replace(arch, emb_dim=None,
                                           table_dims=tuple((n, w) for n, w in arch.table_dims if w < self.width))
        for name, fitness in self.fitnesses.items():
            result = fitness(at_run_width, self.seed)
            out[f"{name}"] = result.value
            out.update({f"{name}: {t}": v for t, v in result.terms.items()})
        return out
