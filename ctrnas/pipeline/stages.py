"""The warm-up and search stages of a run (data is in `data`, the final stage in `final`)."""

from __future__ import annotations

import dataclasses
import json
import time
from functools import partial
from pathlib import Path


from ctrnas.config import to_dict
from ctrnas.data.dataset import atomic_write_text
from ctrnas.pipeline.data import load_rows, rows_after_warmup, split_rows, warmup_rows
from ctrnas.pipeline.results import DataResult, SearchStageResult, WarmupResult
from ctrnas.recipe import Recipe
from ctrnas.space import get_space
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


def new_supernet(recipe: Recipe, data: DataResult):
    """The recipe's supernet with weights drawn from the recipe seed (the global RNG is left untouched)."""
    from ctrnas.supernet.io import build_supernet

    cfg = recipe.train
    return build_supernet(data.schema, get_space(recipe.space), recipe.seed, cfg.embedding_dim, cfg.row_cap)


def _warmup_fingerprint(recipe: Recipe, data: DataResult) -> dict:
    return {"seed": recipe.seed, "space": space_record(recipe.space), "warmup": to_dict(recipe.warmup),
            "train": numeric_settings(recipe.train),
            "data": str(data.path), "train_rows": split_rows(data, "train"),
            # which rows are where: a folder re-prepared in place (another split seed) must not reuse the warm-up
            "split_ctr": {s: v.get("ctr") for s, v in data.meta["splits"].items()}}


def warmup_stage(recipe: Recipe, data: DataResult, out_dir: Path | None = None) -> WarmupResult:
    """Warm the supernet up on the first `warmup.fraction` of the training split (NASRec sampling).

    With `out_dir`, the warmed supernet is saved there and a re-run with the same recipe reloads it; an
    interrupted warm-up resumes from the trainer's checkpoint.
    """
    from ctrnas.supernet.io import load_supernet, save_supernet
    from ctrnas.train.batches import dataset_batches
    from ctrnas.train.warmup import warmup

    recipe = resolve_warmup(recipe, data)
    t0 = time.perf_counter()
    fingerprint = _warmup_fingerprint(recipe, data)
    ckpt = done = None
    if out_dir is not None:
        out_dir = Path(out_dir)
        ckpt, done = out_dir / "supernet.pt", out_dir / "warmup.json"
        if ckpt.exists() and done.exists():
            try:
                record = json.loads(done.read_text())
            except (OSError, ValueError):  # damaged: warm up again (the files are rewritten at the end)
                record = None
            if isinstance(record, dict) and record.get("fingerprint") == json.loads(json.dumps(fingerprint)):
                supernet, _ = load_supernet(ckpt)
                s = record["summary"]
                return WarmupResult(supernet, recipe.warmup.fraction, s.get("rows", 0), s.get("steps", 0),
                                    record["seconds"], ckpt, {**s, "reused": True})
    supernet = new_supernet(recipe, data)
    fraction = recipe.warmup.fraction
    summary = {"fraction": fraction, "steps": 0, "rows": 0, "seconds": 0.0, "full_supernet_steps": 0,
               "full_supernet_horizon": 0}
    if fraction > 0:
        cfg = recipe.train
        train = dataset_batches(data.path, "train", cfg.batch_size, shuffle=True, seed=cfg.seed, fraction=fraction)
        summary = warmup(supernet, supernet.space, train, cfg, recipe.warmup,
                         out_dir=out_dir / "trainer" if out_dir is not None else None)
    seconds = time.perf_counter() - t0
    if out_dir is not None:
        save_supernet(supernet, ckpt, extra={"warmup": summary})
        atomic_write_text(done, json.dumps({"fingerprint": fingerprint, "summary": summary, "seconds": seconds},
                                           indent=1, default=float))
        trainer_ckpt = out_dir / "trainer" / "checkpoint.pt"
        trainer_ckpt.unlink(missing_ok=True)  # the supernet file holds the result; the optimizer state is big
    return WarmupResult(supernet, fraction, int(summary.get("rows", 0)), int(summary.get("steps", 0)), seconds,
                        ckpt, summary)


# ------------------------------------------------------------------------------------------------------
# Search
# ------------------------------------------------------------------------------------------------------


def _count(counter, schema, space_config, emb_dim, arch) -> float:
    return float(counter(schema, space_config, arch, emb_dim=emb_dim))


def resource_counters(recipe: Recipe, data: DataResult):
    """(count_params, count_flops) of an arch, picklable, analytic (no model is built)."""
    from ctrnas.supernet import count_flops, count_params

    emb = recipe.train.embedding_dim
    return (partial(_count, count_params, data.schema, recipe.space, emb),
            partial(_count, count_flops, data.schema, recipe.space, emb))


def make_fitness(recipe: Recipe, data: DataResult, supernet, kind: str | None = None,
                 proxy: str | None = None, proxy_options: dict | None = None, fraction: float | None = None):
    """The recipe's fitness on `supernet` and a note on which training rows it uses.

    Proxy: k batches right after the warm-up rows; one-shot: fine-tuning rows after the warm-up rows (or
    from the start after a full warm-up) and the first `oneshot.eval_rows` validation rows.
    """
    from ctrnas.pipeline import ctr_fitness
    from ctrnas.pipeline.ctr_fitness import OneShotFitness, ProxyFitness, default_init

    recipe = resolve_warmup(recipe, data)
    kind = kind or recipe.fitness_kind
    fraction = recipe.warmup.fraction if fraction is None else fraction
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


def search_stage(recipe: Recipe, data: DataResult, warm: WarmupResult, out_dir: Path | None = None,
                 progress: bool = True) -> SearchStageResult:
    """Run the recipe's search strategy with its fitness; checkpoints after every generation under `out_dir`.
    Evolution starts from the space's baseline archs when `search.seed_population` (those that fit)."""
    from ctrnas.search.build import make_strategy
    from ctrnas.space.baselines import initial_population

    recipe = resolve_warmup(recipe, data)
    t0 = time.perf_counter()
    kind = recipe.fitness_kind
    space = get_space(recipe.space)
    initial = tuple(initial_population(space)) if recipe.search.seed_population else ()
    count_params, count_flops = resource_counters(recipe, data)
    fp = {"warmup": _warmup_fingerprint(recipe, data), "kind": kind, "proxy": to_dict(recipe.proxy),
          "oneshot": to_dict(recipe.oneshot)}
    if recipe.search.strategy == "multifidelity":
        from ctrnas.pipeline.rungs import build_ladder

        fitness, rungs, directions, note = build_ladder(recipe, data, warm.supernet)
        kind, name, maximize = "multifidelity", " > ".join(r.fitness for r in rungs), directions[-1]
        strategy = make_strategy(recipe.search, space, seed=recipe.seed, maximize=maximize,
                                 count_params=count_params, count_flops=count_flops, initial=initial,
                                 rungs=rungs, rung_maximize=directions)
        fp.update(short_training_fingerprint(recipe))
    else:
        fitness, note = make_fitness(recipe, data, warm.supernet, kind)
        name, maximize = (recipe.proxy.name if kind == "proxy" else "oneshot"), fitness.maximize
        strategy = make_strategy(recipe.search, space, seed=recipe.seed, maximize=maximize,
                                 count_params=count_params, count_flops=count_flops, initial=initial)
    ckpt = None
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        ckpt = Path(out_dir) / "search.ckpt"
        # The runner checks the strategy's settings on resume; what it scores with is checked here, so a
        # changed warm-up, proxy or data never continues an old search.
        marker = Path(out_dir) / "fitness.json"
        fp = json.loads(json.dumps(fp))
        if ckpt.exists() and (not marker.exists() or json.loads(marker.read_text()) != fp):
            ckpt.unlink()
        atomic_write_text(marker, json.dumps(fp, indent=1))
    result = strategy.run(fitness, workers=recipe.search.workers, execution=recipe.execution,
                          checkpoint_path=ckpt, progress=progress)
    return SearchStageResult(result, kind, name, maximize, time.perf_counter() - t0, note,
                             tuple(directions) if kind == "multifidelity" else None)


def warmup_config_for(recipe: Recipe, fraction: float) -> Recipe:
    """The recipe with another warm-up fraction (the three settings differ only in this)."""
    return dataclasses.replace(recipe, warmup=dataclasses.replace(recipe.warmup, fraction=fraction, rows=None))


__all__ = ["warmup_stage", "search_stage", "make_fitness", "resource_counters", "new_supernet", "warmup_rows",
           "warmup_config_for", "resolve_warmup"]
