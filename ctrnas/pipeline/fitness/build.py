"""The CTR fitness a search scores with, built from a recipe: the fitness itself (`make_fitness`), the warm-up
rows it must not reuse (`resolve_warmup`), the analytic resource counters, and the fingerprints that tell a
resumed search or final stage whether its scores still hold."""

from __future__ import annotations

import dataclasses
from functools import partial

from ctrnas.config import to_dict
from ctrnas.pipeline.data import load_rows, rows_after_warmup, split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe
from ctrnas.space.config import space_record
from ctrnas.train.config import numeric_settings


def resolve_warmup(recipe: Recipe, data: DataResult) -> Recipe:
    """The recipe with `warmup.rows` turned into the fraction of this training split that reads exactly
    those rows (the loader takes ceil(fraction x N)); unchanged when `warmup.rows` is unset."""
    rows = recipe.warmup.rows
    if rows is None:
        return recipe
    n = split_rows(data, "train")
    fraction = min(1.0, rows / n) if n else 0.0
    return dataclasses.replace(recipe, warmup=dataclasses.replace(recipe.warmup, fraction=fraction, rows=None))


def warmup_fingerprint(recipe: Recipe, data: DataResult) -> dict:
    return {"seed": recipe.seed, "space": space_record(recipe.space), "warmup": to_dict(recipe.warmup),
            "train": numeric_settings(recipe.train),
            "data": str(data.path), "train_rows": split_rows(data, "train"),
            # which rows are where: a folder re-prepared in place (another split seed) must not reuse the warm-up
            "split_ctr": {s: v.get("ctr") for s, v in data.meta["splits"].items()}}


def _count(counter, schema, space_config, emb_dim, arch) -> float:
    return float(counter(schema, space_config, arch, emb_dim=emb_dim))


def _bytes(schema, emb_dim, row_cap, arch) -> float:
    from ctrnas.supernet import embedding_bytes

    return float(embedding_bytes(schema, arch, emb_dim, row_cap))


def bytes_counter(recipe: Recipe, data: DataResult):
    """embedding bytes of an arch as the final stage builds it (its row cap), picklable, analytic."""
    return partial(_bytes, data.schema, recipe.train.embedding_dim, recipe.final_train.row_cap)


def resource_counters(recipe: Recipe, data: DataResult):
    """(count_params, count_flops) of an arch, picklable, analytic (no model is built)."""
    from ctrnas.supernet import count_flops, count_params

    emb, space = recipe.train.embedding_dim, recipe.search_space(data.schema).config
    return (partial(_count, count_params, data.schema, space, emb),
            partial(_count, count_flops, data.schema, space, emb))


def make_fitness(recipe: Recipe, data: DataResult, supernet, kind: str | None = None,
                 proxy: str | None = None, proxy_options: dict | None = None, fraction: float | None = None):
    """The recipe's fitness on `supernet` and a note on which training rows it uses.

    Proxy: k batches right after the warm-up rows; one-shot: fine-tuning rows after the warm-up rows (or
    from the start after a full warm-up) and the first `oneshot.eval_rows` validation rows.
    """
    from ctrnas.pipeline.fitness import ctr_fitness
    from ctrnas.pipeline.fitness.ctr_fitness import OneShotFitness, ProxyFitness, default_init

    recipe = resolve_warmup(recipe, data)
    kind = kind or recipe.fitness_kind
    fraction = recipe.warmup.fraction if fraction is None else fraction
    if kind == "random":
        from ctrnas.pipeline.fitness.ctr_fitness import RandomFitness

        return RandomFitness(), "no rows: a uniform draw per candidate (random search)"
    if kind == "proxy":
        p = recipe.proxy
        bs = p.batch_size or recipe.train.batch_size
        need = p.batches * bs
        start, note = rows_after_warmup(data, fraction, need)
        rows = load_rows(data, "train", start, need)
        init = p.init if p.init != "auto" else default_init(fraction)
        name = proxy or p.name
        options = ctr_fitness.proxy_options(name, p.options if proxy_options is None else proxy_options, fraction)
        fit = ProxyFitness(supernet, name, options, rows, bs, p.batches, init=init)
        return fit, f"proxy rows [{start}, {start + need}) of train ({note})"
    o = recipe.oneshot
    ft_rows, note = None, "no fine-tuning"
    if o.finetune_steps > 0:
        need = min(o.finetune_steps * o.batch_size, split_rows(data, "train"))
        start, where = rows_after_warmup(data, fraction, need)
        ft_rows = load_rows(data, "train", start, need)
        note = f"fine-tuning rows [{start}, {start + need}) of train ({where})"
    eval_rows = load_rows(data, "val", 0, o.eval_rows)
    fit = OneShotFitness(supernet, ft_rows, eval_rows, o.finetune_steps, o.lr, o.batch_size, o.eval_batch_size)
    return fit, f"{note}; {len(eval_rows)} val rows"


def short_training_fingerprint(recipe) -> dict:
    """What the short-training rungs' scores depend on besides the arch: they train as the final stage."""
    fp = {"final_train": numeric_settings(recipe.final_train)}
    if recipe.final.dense_init != "nasrec":  # the only init before the key existed: older checkpoints stay valid
        fp["final_dense_init"] = recipe.final.dense_init
    return fp


__all__ = ["make_fitness", "resolve_warmup", "resource_counters", "short_training_fingerprint",
           "warmup_fingerprint"]
