"""The memory front of a run: every model the final stage trained, with its validation and test
log loss and its embedding bytes, the non-dominated ones marked, as `front.json` and `plots/front.png`.

A model is on the front when no other trained model (candidate or baseline) has a validation log loss at
most as high with at most as many embedding bytes, better in one of them (of equal points, the first
listed). `ctrnas export --pick N` writes the front's N-th model (numbered as `front.json` lists them, by
bytes) as a model folder; with `search.evolution.objective: front` the final stage keeps every model's
weights for that.
"""

from __future__ import annotations

import math
from pathlib import Path

from ctrnas.pipeline.results import FinalResult, TrainedModel

FRONT_FILE = "front.json"


def _bytes(m: TrainedModel) -> float:
    return 4.0 * m.emb_params if math.isfinite(m.emb_params) else math.nan  # float32 tables


def _baseline_job(label: str) -> str:
    """The final stage's job name of a baseline from its label: "dlrm" or "dlrm at width 8" -> "dlrm@8"."""
    name, at, width = label.partition(" at width ")
    return f"{name}@{width}" if at else name


def front_rows(recipe, final: FinalResult, schema) -> list[dict]:
    """One row per trained model (candidates first, then baselines), with `on_front` and, for the models on
    it, `pick` (0 = the fewest bytes)."""
    from ctrnas.search.plots import pareto_front

    models = list(final.candidates) + list(final.baselines)
    rows = []
    for i, m in enumerate(models):
        cand = i < len(final.candidates)
        dropped = []
        if cand and m.arch is not None:
            common = m.arch.emb_dim or recipe.train.embedding_dim
            dropped = [n for n in schema.sparse_names if m.arch.table_width(n, common) == 0]
        val = m.val.get("logloss", math.nan) if m.status == "ok" else math.nan
        rows.append({"label": m.label, "kind": "candidate" if cand else "baseline",
                     "arch_key": m.arch.key() if cand and m.arch is not None else None,
                     "arch": m.arch.to_json() if cand and m.arch is not None else None,
                     "baseline": None if cand else _baseline_job(m.label),
                     "val_logloss": m.val.get("logloss"), "test_logloss": m.test.get("logloss"),
                     "embedding_bytes": _bytes(m), "dense_params": m.params, "dropped_fields": dropped,
                     "status": m.status, "on_front": False, "_val": val})
    front = pareto_front([r["embedding_bytes"] for r in rows], [r["_val"] for r in rows])
    for pick, i in enumerate(front):  # sorted by bytes
        rows[int(i)].update(on_front=True, pick=pick)
    for r in rows:
        del r["_val"]
    return rows


def write_front(out: Path, recipe, final: FinalResult, data) -> dict:
    """`out/front.json` and `out/plots/front.png`; returns the front.json content."""
    from ctrnas.files import atomic_write_text
    from ctrnas.search import plots
    from ctrnas.train.metrics import strict_json

    rows = front_rows(recipe, final, data.schema)
    cands = [r for r in rows if r["kind"] == "candidate"]
    content = {"objective": "validation log loss against embedding bytes (float32 tables)",
               "kept_weights": recipe.search.evolution.objective == "front", "models": rows}
    atomic_write_text(Path(out) / FRONT_FILE, strict_json(content) + "\n")
    value = lambda x: float(x) if x is not None else math.nan  # noqa: E731
    plots.plot_pareto([value(r["embedding_bytes"]) for r in cands], [value(r["val_logloss"]) for r in cands],
                      Path(out) / "plots" / "front.png", xlabel="embedding bytes", ylabel="validation log loss",
                      points={r["label"]: (value(r["embedding_bytes"]), value(r["val_logloss"]))
                              for r in rows if r["kind"] == "baseline"})
    return content
