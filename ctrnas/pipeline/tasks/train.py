"""`ctrnas train`: one baseline or architecture trained from scratch as a run's final stage trains it (the final
stage's template and from-scratch export), so it gives the numbers a run gives for the same settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ctrnas.errors import CtrnasError
from ctrnas.pipeline.inputs import RECIPE_KEYS, check_arch, read_arch, space_spec
from ctrnas.train.checkpoint import FILE as CHECKPOINT_FILE


# `ctrnas train --layernorm` -> the final stage's `final.layernorm`
LAYERNORM = {"off": False, "space": None, "on": True, "auto": "auto"}


def run_recipe(path):
    """The Recipe at `path` when the file is a run's recipe (it has a key only a recipe has, as the
    `recipe.yaml` a run writes), else None (a YAML of TrainConfig keys)."""
    from ctrnas.config import load_yaml

    if not path:
        return None
    data = load_yaml(path)
    if isinstance(data, dict) and any(k in data for k in RECIPE_KEYS):
        from ctrnas.recipe import load_recipe

        return load_recipe(path)
    return None


def train_config(recipe_path: str | Path | None = None, final: bool = False, default_threads: int | None = None,
                 protocol: str | None = None, **overrides):
    """TrainConfig from a YAML file (its `train:` section, or the top level) with non-None overrides. With
    `final`, a run's recipe gives its final stage's settings instead (`final.train` over `train`, under its
    `final.protocol` unless `protocol` is given), and its `threads`. `protocol` "early-stop" (the default with
    `final` and no run recipe): the early-stop preset (`ctrnas.train.config.early_stopping`) for every key
    neither the file nor `overrides` set.
    `default_threads`: the torch threads when neither the file nor `overrides` set them."""
    from ctrnas.config import from_dict, load_yaml
    from ctrnas.train.config import TrainConfig, early_stopping

    recipe = run_recipe(recipe_path) if final else None
    given = {k for k, v in overrides.items() if v is not None}
    if recipe is not None:
        if protocol is not None:
            recipe = dataclasses.replace(recipe, final=dataclasses.replace(recipe.final, protocol=protocol))
        base = recipe.final.train if recipe.final.train is not None else recipe.train
        cfg = dataclasses.replace(base, **{k: overrides[k] for k in given})
        if recipe.final.protocol == "early-stop":
            cfg = early_stopping(cfg, frozenset(recipe.final_train_keys) | given)
        if cfg.threads is None and recipe.threads is not None:  # the run's threads, as its final stage had
            cfg = dataclasses.replace(cfg, threads=recipe.threads)
        overrides = {}
    else:
        data, source = {}, "<defaults>"
        if recipe_path:
            data, source = load_yaml(recipe_path), str(recipe_path)
            if "train" in data and isinstance(data["train"], dict):
                data = data["train"]
        cfg = from_dict(TrainConfig, data, source=source)
        cfg = dataclasses.replace(cfg, **{k: overrides[k] for k in given})
        if protocol == "early-stop" or (protocol is None and final):  # a training of its own: to its best
            cfg = early_stopping(cfg, frozenset(data) | given)
    if cfg.threads is None and default_threads is not None:
        cfg = dataclasses.replace(cfg, threads=default_threads)
    from ctrnas.device import resolve_device

    resolve_device(cfg.device)  # an unusable device fails now, before any data is read
    return cfg


def final_recipe(data_dir, cfg, recipe=None, space=None, layernorm: str | None = None,
                 embedding_init: str | None = None, dense_init: str | None = None):
    """The Recipe whose final stage trains a model as asked: a run's recipe (a path or a Recipe: its final
    section and the space it searched) or one made of `cfg` and `space` (default nasrec-full, LayerNorm off);
    `space`, `layernorm` (a key of LAYERNORM), `embedding_init` and `dense_init` override it when given. Its final stage
    trains with `cfg`."""
    from ctrnas.recipe import DataSection, Recipe
    from ctrnas.space import get_space

    run = recipe if recipe is None or isinstance(recipe, Recipe) else run_recipe(recipe)
    changes = {"train": cfg, "protocol": "nasrec"}  # `cfg` is resolved already: its final stage trains it as is
    if run is None:
        run = Recipe(name="train", data=DataSection(path=str(data_dir)), seed=cfg.seed,
                     space=get_space(space_spec(space or "nasrec-full")).config, train=cfg)
        layernorm = layernorm or "off"
    elif space is not None:
        run = dataclasses.replace(run, space=get_space(space_spec(space)).config)
    if layernorm is not None:
        changes["layernorm"] = LAYERNORM[layernorm]
    if embedding_init is not None:
        changes["embedding_init"] = embedding_init
    if dense_init is not None:
        changes["dense_init"] = dense_init
    return dataclasses.replace(run, final=dataclasses.replace(run.final, **changes))


def arch_model(arch_path, data, recipe, space_name: str, resume_dir=None):
    """(model, name, extra) of an architecture trained from scratch as `recipe`'s final stage trains it (the
    final stage's own template and export: every weight drawn from the training seed); with `resume_dir`, in
    the layout of the checkpoint there (`job_model`)."""
    from ctrnas.pipeline.fitness.scratch import final_template, job_model
    from ctrnas.train.normalise import use_layernorm

    arch = read_arch(arch_path)  # a bad file fails before any other work
    template = final_template(recipe, data)
    check_arch(arch_path, arch, (template[False] if isinstance(template, dict) else template).space)
    model = job_model(recipe, data, template, ("arch", arch), resume_dir)
    extra = {"arch": arch.to_json(), "space": space_name,
             "layernorm": use_layernorm(recipe.final.layernorm, arch, recipe.space.layernorm),
             "embedding_init": recipe.final.embedding_init, "dense_init": recipe.final.dense_init}
    return model, f"arch-{arch.key()}", extra


def train_model(data_dir, cfg, baseline: str | None = None, arch: str | Path | None = None,
                space=None, out_dir=None, train_fraction: float | None = None, layernorm: str | None = None,
                embedding_init: str | None = None, dense_init: str | None = None, distributed: bool = False,
                sharding: str | None = None, dist_backend: str | None = None, recipe=None,
                overwrite: bool = False) -> tuple[dict | None, Path]:
    """Train a baseline or an architecture from scratch; (metrics, results folder). With a run's `recipe`, as
    its final stage trains (its space, LayerNorm, embedding and dense init, and its final.train_rows / val_rows /
    test_rows; `cfg` should come from `train_config(recipe, final=True)`). With `distributed` (on every
    torchrun rank) the tables are sharded, every row is used, and only rank 0 gets the metrics (others None).
    A results folder holding files ctrnas did not write is refused unless `overwrite` (ctrnas.data.ownership)."""
    from ctrnas.pipeline.data import open_data
    from ctrnas.recipe import Recipe

    data = open_data(data_dir)
    run = recipe if recipe is None or isinstance(recipe, Recipe) else run_recipe(recipe)
    if arch is not None and space is None and run is None:
        from ctrnas.space.baselines import SHIPPED_ARCHS, home_space

        if str(arch) in SHIPPED_ARCHS and not Path(arch).exists():
            space = home_space(str(arch))  # a shipped arch by name trains in the space it was made for
    final = final_recipe(data_dir, cfg, run, space, layernorm, embedding_init, dense_init)
    if baseline:
        from ctrnas.train.baselines import build_baseline

        def build():
            return build_baseline(baseline, data.schema, cfg.embedding_dim, cfg.row_cap, cfg.seed)

        model, name, extra = build(), baseline, {}
    elif arch:
        if isinstance(space, str) or space is None and not isinstance(recipe, Recipe):
            space_name = str(space or recipe or "nasrec-full")  # as given: a name or a file
        else:  # a SpaceConfig, or a Recipe object whose space it trains in
            space_name = final.space.name

        def build():
            return arch_model(arch, data, final, space_name)[0]

        model, name, extra = arch_model(arch, data, final, space_name)
    else:
        raise CtrnasError("give a baseline or an architecture to train")
    out = Path(out_dir or Path("runs") / f"train-{name.replace('+', 'plus')}-seed{cfg.seed}")
    if arch and not baseline and (out / CHECKPOINT_FILE).is_file():  # resumes, in its checkpoint's layout
        model = arch_model(arch, data, final, space_name, resume_dir=out)[0]
    if distributed:
        from ctrnas.data.ownership import check_model_folder
        from ctrnas.distributed.dmp import ShardingConfig

        check_model_folder(out, overwrite)
        from ctrnas.distributed.run import train_and_test_distributed

        metrics = train_and_test_distributed(model, data_dir, cfg, out, name, ShardingConfig(sharding),
                                             train_fraction=train_fraction, extra=extra, backend=dist_backend)
        if metrics is not None:  # rank 0: the gathered weights into a fresh, unsharded copy of the model
            from ctrnas.safeload import load_weights_file

            fresh = build()
            fresh.load_state_dict(load_weights_file(out / "model.pt", "model weights file"))
            save_trained(fresh, out, data_dir, data.schema, name, metrics, arch=bool(arch and not baseline),
                         build={"dim": cfg.embedding_dim, "row_cap": cfg.row_cap})
        return metrics, out
    from ctrnas.data.ownership import model_folder
    from ctrnas.locks import folder_lock, reading
    from ctrnas.train.run import train_and_test

    rows = {}
    if run is not None:  # the final stage's rows
        rows = {"train_rows": final.final.train_rows, "val_rows": final.final.val_rows,
                "test_rows": final.final.test_rows}
    with folder_lock(out, "train"), model_folder(out, overwrite), reading(data_dir, "train"):
        metrics = train_and_test(model, data_dir, cfg, out, name, train_fraction=train_fraction, extra=extra, **rows)
        save_trained(model, out, data_dir, data.schema, name, metrics, arch=bool(arch and not baseline),
                     build={"dim": cfg.embedding_dim, "row_cap": cfg.row_cap})
        return metrics, out


def save_trained(model, out: Path, data_dir, schema, name: str, metrics: dict, arch: bool,
                 build: dict | None = None) -> dict:
    """Make a `ctrnas train` folder a complete model folder, as a run's `model/` (the same writers): the
    preprocessing, `model.pt2`, `model.pt` (the trained state_dict, never a pickled module) and the model
    card, so `ctrnas predict --model OUT` and `ctrnas export --trained OUT` take it. `build`: a baseline's
    `dim` and `row_cap`, which rebuild it."""
    import sys

    from ctrnas.data.preprocess import copy_preprocess

    # torch.export takes a minute or more after the last metrics: say what the wait is
    print(f"writing {Path(out) / 'model.pt2'} (torch.export) ...", file=sys.stderr, flush=True)
    copy_preprocess(data_dir, out)  # the raw-row preprocessing travels with the model
    card_metrics = {f"{split}_{k}": (metrics.get(split) or {}).get(k) for split in ("val", "test")
                    for k in ("logloss", "auc")}
    if arch:
        from ctrnas.supernet.io import save_exported

        return save_exported(model, out, init="fresh+trained", metrics=card_metrics, source=f"ctrnas train ({name})")
    from ctrnas.train.baselines.folder import save_baseline

    return save_baseline(model, out, name, card_metrics, schema, build=build)
