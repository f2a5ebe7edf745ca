"""Which sparse fields carry signal: permutation importance (Breiman, "Random Forests", 2001) of one short
training, the question AutoField answers with learned gates.

A seed arch is trained as a short rung trains it (`rungs.ShortTrainingFitness`); then, one field at a time,
that field's ids are shuffled across the validation rows and the rise of the validation log loss is measured,
paired per example. A field whose shuffle does not raise the loss by more than `z` standard errors (or, with
`min_share`, by that share of the strongest field's rise) is one the model does not use. An embedding
search (`search.field_probe`) starts evolution from the seeds with those fields dropped, beside the seeds
themselves: one-step width moves over 30 fields rarely find 25 noise fields (docs/embedding-search.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import torch

from ctrnas.files import atomic_write_text
from ctrnas.pipeline.data import load_rows, split_rows
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import Recipe

FILE = "fields.json"  # under the search folder


def per_example_loss(trainer, rows, batch_size: int) -> torch.Tensor:
    """Log loss of every row of `rows` (a `TensorRows`) under the trainer's model, in eval mode."""
    from torchrec.datasets.utils import Batch

    model = trainer.model
    was = model.training
    model.eval()
    out = []
    with torch.no_grad():
        for dense, kjt, labels in rows.batches(batch_size, device=trainer.device):
            logits = trainer.eval_forward(model, Batch(dense, kjt, labels), -1).reshape(-1).float()
            out.append(torch.nn.functional.binary_cross_entropy_with_logits(logits, labels.reshape(-1).float(),
                                                                            reduction="none").cpu())
    model.train(was)
    return torch.cat(out) if out else torch.zeros(0)


def permutation_importance(trainer, rows, fields, batch_size: int, seed: int) -> list[dict]:
    """Per field of `fields` (names of `rows.names`): the mean rise of the per-example log loss when that
    field's ids are shuffled across the rows, its standard error and their ratio z (the same shuffle for
    every field, drawn from `seed`)."""
    base = per_example_loss(trainer, rows, batch_size)
    perm = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed))
    out = []
    for name in fields:
        j = rows.names.index(name)
        ids = rows.ids.clone()
        ids[:, j] = rows.ids[perm, j]
        diff = per_example_loss(trainer, dataclasses.replace(rows, ids=ids), batch_size) - base
        mean = float(diff.mean())
        se = float(diff.std() / math.sqrt(len(diff))) if len(diff) > 1 else math.nan
        out.append({"field": name, "rise": mean, "se": se, "z": mean / se if se > 0 else 0.0})
    return out


def probe_fields(recipe: Recipe, data: DataResult, template, arch, fields, out_dir: Path | None = None) -> dict:
    """The probe of `search.field_probe` on `arch`: {"arch": key, "train_rows", "val_rows", "z", "fields":
    [{field, rise, se, z, signal}]}; saved as `out_dir/fields.json` and reused from there when its settings
    match (a resumed run does not train again)."""
    from ctrnas.pipeline.fitness.rungs import share_rows, short_trainer

    cfg = recipe.search.field_probe
    rows = share_rows(recipe, data, cfg.fraction)
    val_rows = min(cfg.val_rows, split_rows(data, "val"))
    settings = {"arch": arch.key(), "train_rows": rows, "val_rows": val_rows, "z": cfg.z,
                "min_share": cfg.min_share, "min_rise": cfg.min_rise, "seed": recipe.seed,
                "searched": list(fields), "train": dataclasses.asdict(recipe.final_train)}
    settings = json.loads(json.dumps(settings, default=str))
    path = Path(out_dir) / FILE if out_dir is not None else None
    if path is not None and path.exists():
        from ctrnas.errors import CtrnasError
        from ctrnas.safeload import read_json

        try:
            old = read_json(path, "field importance record")
        except CtrnasError:  # damaged: measured again and rewritten
            old = None
        if isinstance(old, dict) and old.get("settings") == settings:
            return old
    trainer = short_trainer(recipe, data, template, arch, rows)
    result = permutation_importance(trainer, load_rows(data, "val", limit=val_rows), fields,
                                    recipe.final_train.eval_batch_size, recipe.seed)
    top = max((r["rise"] for r in result), default=0.0)
    floor = cfg.min_share * top
    for r in result:
        r["signal"] = bool(r["z"] > cfg.z and r["rise"] >= floor)
    record = {"settings": settings, "arch": arch.key(), "train_rows": rows, "val_rows": val_rows, "z": cfg.z,
              "min_rise": floor, "top_rise": top, "learnt": bool(top >= cfg.min_rise), "fields": result}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1))
    return record


def without_noise(space, archs, record: dict) -> tuple:
    """Each of `archs` with the fields the probe found no signal in dropped (table width 0); none when every
    field showed signal or the probe's training had not learnt the tables (no field's shuffle mattered). The
    best-scoring field is always kept, so a model keeps at least one table."""
    quiet = [r["field"] for r in record["fields"] if not r["signal"]]
    if not quiet or not record.get("learnt", True):
        return ()
    if len(quiet) == len(record["fields"]):
        best = max(record["fields"], key=lambda r: r["z"])["field"]
        quiet = [f for f in quiet if f != best]
    return tuple(space.drop_tables(a, quiet) for a in archs)
