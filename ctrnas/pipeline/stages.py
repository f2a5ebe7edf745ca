"""The warm-up and search stages of a run (data is in `data`, the final stage in `final`)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path


from ctrnas.config import to_dict
from ctrnas.errors import CtrnasError
from ctrnas.files import atomic_write_text
from ctrnas.pipeline.data import warmup_rows
from ctrnas.pipeline.fitness.build import (bytes_counter, make_fitness, resolve_warmup, resource_counters,
                                           short_training_fingerprint, warmup_fingerprint)
from ctrnas.pipeline.results import DataResult, SearchStageResult, WarmupResult
from ctrnas.recipe import Recipe
from ctrnas.safeload import read_json
from ctrnas.space import get_space


def new_supernet(recipe: Recipe, data: DataResult):
    """The recipe's supernet with weights drawn from the recipe seed (the global RNG is left untouched)."""
    from ctrnas.supernet.io import build_supernet

    cfg = recipe.train
    return build_supernet(data.schema, get_space(recipe.space), recipe.seed, cfg.embedding_dim, cfg.row_cap)


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
    fingerprint = warmup_fingerprint(recipe, data)
    ckpt = done = None
    if out_dir is not None:
        out_dir = Path(out_dir)
        ckpt, done = out_dir / "supernet.pt", out_dir / "warmup.json"
        if ckpt.exists() and done.exists():
            try:
                record = read_json(done, "warm-up record")
            except CtrnasError:  # damaged: warm up again (the files are rewritten at the end)
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


def initial_archs(recipe: Recipe, space, data: DataResult, warm: WarmupResult, out_dir: Path | None = None,
                  on_probe=None) -> tuple[tuple, dict | None]:
    """(evolution's first archs, the field probe's record or None): the shipped archs of `search.seeds` that fit
    `space` (when `search.seed_population`); with table widths searched, also each seed without the fields the
    probe finds no signal in, and with the front objective each seed at every narrower table width."""
    from ctrnas.space.baselines import initial_population

    initial = tuple(initial_population(space, recipe.seed_names)) if recipe.search.seed_population else ()
    probe = None
    if space.config.table_dims and initial and recipe.search.field_probe.fraction > 0:
        from ctrnas.pipeline.fitness.fields import probe_fields, without_noise
        from ctrnas.pipeline.fitness.scratch import final_template

        probe = probe_fields(recipe, data, final_template(recipe, data, warm.supernet), initial[0],
                             space.config.tables, out_dir)
        initial += tuple(a for a in without_noise(space, initial, probe) if a not in initial)
        if on_probe is not None:
            on_probe(probe)
    if space.config.table_dims and initial and recipe.search.evolution.objective == "front":
        # spread over the bytes from the start; a search for the lowest log loss alone keeps its seeds as given
        # (each a line of its own under `search.evolution.lineages`)
        initial += tuple(space.narrower(a, w) for w in sorted(space.config.table_dims, reverse=True)
                         for a in initial if 0 < w < space.common_width(a))
    return initial, probe


def search_stage(recipe: Recipe, data: DataResult, warm: WarmupResult, out_dir: Path | None = None,
                 progress: bool = True, on_probe=None) -> SearchStageResult:
    """Run the recipe's search strategy with its fitness; checkpoints after every generation under `out_dir`.
    Evolution starts from the shipped archs of `search.seeds` when `search.seed_population` (those that fit).
    `on_probe` is called with the field probe's record as soon as it is known (before the search)."""
    from ctrnas.pipeline.fitness.ladder import build_ladder
    from ctrnas.search.build import make_strategy
    from ctrnas.search.strategies import get_strategy

    recipe = resolve_warmup(recipe, data)
    t0 = time.perf_counter()
    kind = recipe.fitness_kind
    space = recipe.search_space(data.schema)
    initial, probe = initial_archs(recipe, space, data, warm, out_dir, on_probe)
    count_params, count_flops = resource_counters(recipe, data)
    count_bytes = bytes_counter(recipe, data)
    fp = {"warmup": warmup_fingerprint(recipe, data), "kind": kind, "proxy": to_dict(recipe.proxy),
          "oneshot": to_dict(recipe.oneshot)}
    featurize = None
    if recipe.search.predictor.pool:
        from ctrnas.pipeline.fitness.features import CtrFeatures

        featurize = CtrFeatures(recipe, data, warm.supernet, recipe.search.predictor.proxies)
    if get_strategy(recipe.search.strategy).by_rungs:
        fitness, rungs, directions, note = build_ladder(recipe, data, warm.supernet, out_dir)
        kind, name, maximize = "multifidelity", " > ".join(r.fitness for r in rungs), directions[-1]
        strategy = make_strategy(recipe.search, space, seed=recipe.seed, maximize=maximize,
                                 count_params=count_params, count_flops=count_flops, count_bytes=count_bytes,
                                 initial=initial, rungs=rungs, rung_maximize=directions, featurize=featurize)
        fp.update(short_training_fingerprint(recipe))
        if any(r.fitness in ("prefix", "inherit") for r in rungs):  # prefix rungs are the final stage's own trainings
            fp["final_rows"] = [recipe.final.train_rows, recipe.final.val_rows, recipe.final.layernorm]
    else:
        fitness, note = make_fitness(recipe, data, warm.supernet, kind)
        name, maximize = {"proxy": recipe.proxy.name}.get(kind, kind), fitness.maximize
        strategy = make_strategy(recipe.search, space, seed=recipe.seed, maximize=maximize,
                                 count_params=count_params, count_flops=count_flops, count_bytes=count_bytes,
                                 initial=initial, featurize=featurize)
    ckpt = None
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        ckpt = Path(out_dir) / "search.ckpt"
        # The runner checks the strategy's settings on resume; what it scores with is checked here, so a
        # changed warm-up, proxy or data never continues an old search.
        marker = Path(out_dir) / "fitness.json"
        fp = json.loads(json.dumps(fp))
        stale = not marker.exists() or _read_marker(marker) != fp
        if ckpt.exists() and stale:
            ckpt.unlink()
        if stale:  # prefix-rung trainings of another setting (ctrnas wrote them) must not be continued
            remove_prefixes(Path(out_dir), keep=())
        atomic_write_text(marker, json.dumps(fp, indent=1))
    result = strategy.run(fitness, workers=recipe.search.workers, execution=recipe.execution,
                          checkpoint_path=ckpt, progress=progress)
    evolution = getattr(strategy, "evolution", strategy)
    predictor = getattr(evolution, "predictor", None)
    out = SearchStageResult(result, kind, name, maximize, time.perf_counter() - t0, note,
                            tuple(directions) if kind == "multifidelity" else None,
                            predictor.report() if predictor is not None else None, probe)
    if out_dir is not None:  # only the retrained candidates' prefix trainings are continued: free the others'
        keep = out.retrained(recipe.top_k, recipe.search.evolution.lineages)
        remove_prefixes(Path(out_dir), keep={r.key for r in keep})
    return out


def _read_marker(marker: Path):
    """The fitness record of a search folder; a damaged one is refused (deleting it starts the search again)."""
    from ctrnas.errors import DamagedFile

    try:
        return read_json(marker, "search's fitness record")
    except DamagedFile as e:
        raise DamagedFile(marker, f"{e.reason}; delete it to start the search again") from None


def remove_prefixes(search_dir: Path, keep) -> None:
    """Delete the prefix-rung trainings (`RUN/search/prefix/<key>/`, written by ctrnas) not in `keep`, and the
    line weights an inherit rung kept in those it keeps (only the search's children start from them)."""
    import shutil

    from ctrnas.pipeline.fitness.inherit import GRAFT
    from ctrnas.pipeline.fitness.rungs import PREFIX_DIR

    root = Path(search_dir) / PREFIX_DIR
    if root.is_dir():
        for d in root.iterdir():
            if d.is_dir() and d.name not in keep:
                shutil.rmtree(d)
            elif d.is_dir():
                (d / GRAFT).unlink(missing_ok=True)


def warmup_config_for(recipe: Recipe, fraction: float) -> Recipe:
    """The recipe with another warm-up fraction (the three settings differ only in this)."""
    return dataclasses.replace(recipe, warmup=dataclasses.replace(recipe.warmup, fraction=fraction, rows=None))


__all__ = ["warmup_stage", "search_stage", "new_supernet", "warmup_rows", "warmup_config_for"]
