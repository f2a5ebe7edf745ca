"""`ctrnas export`: one architecture as a standalone model folder, with weights inherited from a supernet
checkpoint or drawn fresh from a seed, and the raw-row preprocessing beside it; or (`--trained`) the model a
`ctrnas train` folder holds, written again as a model folder."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ctrnas.errors import CtrnasError
from ctrnas.pipeline.inputs import check_arch, read_arch, read_json, space_spec


@contextlib.contextmanager
def _writing(out_dir, overwrite: bool):
    """The model folder locked and claimed (ctrnas.data.ownership): refused when it holds files ctrnas did
    not write, unless `overwrite`, which still never replaces one."""
    from ctrnas.data.ownership import model_folder
    from ctrnas.locks import folder_lock

    with folder_lock(out_dir, "export"), model_folder(out_dir, overwrite):
        yield


def export_arch(arch_path, out_dir, supernet: str | Path | None = None, data_dir=None, space="nasrec-full",
                emb_dim: int | None = None, row_cap: int | None = None, init: str | None = None, seed: int = 0,
                metrics_path=None, torch_export: bool = False, overwrite: bool = False) -> dict:
    """A standalone model folder of one architecture (inherited weights from a supernet checkpoint, or fresh
    ones from `seed`); returns the model card."""
    from ctrnas.data.dataset import load_schema
    from ctrnas.supernet.export import export
    from ctrnas.supernet.io import build_supernet, load_supernet, save_exported

    arch = read_arch(arch_path)  # a bad file fails before any loading
    schema = load_schema(data_dir) if data_dir else None
    if supernet:
        net, _ = load_supernet(supernet, schema=schema, space=space_spec(space), emb_dim=emb_dim, row_cap=row_cap)
        init, source = init or "inherit", str(supernet)
    elif schema is None:
        raise CtrnasError("give --supernet (inherited weights) or --data (fresh weights)")
    elif init == "inherit":
        raise CtrnasError("--init inherit needs --supernet")
    else:
        net = build_supernet(schema, space_spec(space), None, emb_dim, row_cap, drawn=False)  # re-drawn from seed
        init, source = "fresh", None
    check_arch(arch_path, arch, net.space)
    metrics = read_json(metrics_path, "metrics") if metrics_path else None
    model = export(net, arch, init=init, seed=seed)
    with _writing(out_dir, overwrite):
        if data_dir:
            from ctrnas.data.preprocess import copy_preprocess

            copy_preprocess(data_dir, out_dir)  # the raw-row preprocessing travels with the model
        return save_exported(model, out_dir, init=init, metrics=metrics, source=source, torch_export=torch_export)


def export_trained(folder, out_dir, torch_export: bool = False, overwrite: bool = False) -> dict:
    """A `ctrnas train` folder (a complete model folder since `save_trained`) exported again into `out_dir`:
    the same files, re-written from the trained module; returns the model card."""
    from ctrnas.data.preprocess import copy_preprocess
    from ctrnas.supernet.io import load_exported
    from ctrnas.train.baselines.folder import load_baseline

    folder, out_dir = Path(folder), Path(out_dir)
    if not folder.is_dir():
        raise CtrnasError(f"{folder}: not a folder; give the --out folder of `ctrnas train`")
    if not (folder / "model_card.json").is_file():
        if (folder / "model" / "model_card.json").is_file():
            raise CtrnasError(f"{folder}: a run's folder; its model is {folder / 'model'}, a complete model folder "
                              "already (ctrnas predict --model takes it)")
        if (folder / "metrics.json").is_file():
            raise CtrnasError(f"{folder}: trained by an older ctrnas that wrote no export; run the same `ctrnas "
                              "train` command again (it resumes from checkpoint.pt and writes one)")
        raise CtrnasError(f"{folder}: not a `ctrnas train` folder (model_card.json and metrics.json missing)")
    if out_dir.resolve() == folder.resolve():
        raise CtrnasError(f"{out_dir}: is the trained folder itself; give another --out")
    card = read_json(folder / "model_card.json", "model card")
    model = load_baseline(folder) or load_exported(folder)  # rebuilt from the card, then weights only
    source = f"{folder} (ctrnas train)"
    with _writing(out_dir, overwrite):
        copy_preprocess(folder, out_dir)
        if card.get("kind") == "baseline":
            from ctrnas.data.schema import DatasetSchema
            from ctrnas.train.baselines.folder import save_baseline

            schema = DatasetSchema.from_json(card["schema"]) if card.get("schema") else None
            return save_baseline(model, out_dir, card["baseline"], card.get("metrics") or {}, schema,
                                 build=card.get("build"), label=card.get("label"))
        from ctrnas.supernet.io import save_exported

        return save_exported(model, out_dir, init=card.get("init", "fresh+trained"), metrics=card.get("metrics"),
                             source=source, torch_export=torch_export)


def export_pick(run_dir, pick: int, out_dir, torch_export: bool = False, overwrite: bool = False) -> dict:
    """Model `pick` of a run's front (`front.json`, `ctrnas.pipeline.front`) as a model folder, from the weights
    its final stage kept; returns the model card."""
    import math

    from ctrnas.data.dataset import load_schema
    from ctrnas.data.preprocess import copy_preprocess
    from ctrnas.pipeline.data import open_data
    from ctrnas.pipeline.final.resume import jobs_for
    from ctrnas.pipeline.final.selection import export_baseline
    from ctrnas.pipeline.final.stage import quiet_recipe
    from ctrnas.pipeline.fitness.scratch import baseline_label, final_template, reload_job
    from ctrnas.recipe import load_recipe
    from ctrnas.space import Arch

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    front = read_json(run_dir / "front.json", "front (written by a run with space.table_dims or a front search)")
    on = {r.get("pick"): r for r in front.get("models", []) if r.get("on_front")}
    if pick not in on:
        raise CtrnasError(f"{run_dir / 'front.json'}: no model {pick} on the front (picks: {sorted(on)})")
    row = on[pick]
    recipe = load_recipe(run_dir / "recipe.yaml")
    data = open_data(recipe.data_dir)
    what = ("arch", Arch.from_json(row["arch"])) if row["kind"] == "candidate" else ("baseline", row["baseline"])
    label = row["label"] if row["kind"] == "candidate" else f"baseline {baseline_label(row['baseline'])}"
    quiet = quiet_recipe(recipe)
    job = jobs_for(quiet, data, run_dir, [(label, what)])[0]
    if not job.has_checkpoint():
        raise CtrnasError(f"{job.dir}: the weights of {row['label']} were not kept (the final stage keeps every "
                          "model's weights only with search.evolution.objective: front)")
    model = reload_job(recipe, quiet, data, final_template(recipe, data, None), what, job)
    metrics = {"val_logloss": row["val_logloss"], "test_logloss": row["test_logloss"]}
    source = f"{run_dir} front pick {pick} ({row['label']})"
    with _writing(out_dir, overwrite):
        copy_preprocess(recipe.data_dir, out_dir)
        if row["kind"] == "baseline":
            from ctrnas.pipeline.results import TrainedModel

            m = TrainedModel(baseline_label(row["baseline"]), None, {"logloss": row["val_logloss"]},
                             {"logloss": row["test_logloss"]}, row["dense_params"], math.nan, 0.0)
            cfg = recipe.final_train
            export_baseline(model, out_dir, m, source, load_schema(recipe.data_dir),
                            {"dim": cfg.embedding_dim, "row_cap": cfg.row_cap})
            return read_json(out_dir / "model_card.json", "model card")
        from ctrnas.supernet.io import save_exported

        return save_exported(model, out_dir, init="fresh+trained", metrics=metrics, source=source,
                             torch_export=torch_export)
