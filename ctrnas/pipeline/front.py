"""The memory front of a run (issue 30): every model the final stage trained, with its validation and test
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


def front_rows(recipe, final: FinalResult, schema) -> list[dict]:
    """One row per trained model (candidates first, then baselines), with `on_front` and, for the models on
    it, `pick` (0 = the fewest bytes)."""
    from ctrnas.pipeline.fitness.scratch import baseline_jobs
    from ctrnas.search.plots import pareto_front

    models = list(final.candidates) + list(final.baselines)
    jobs = baseline_jobs(recipe)
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
                     "baseline": None if cand else jobs[i - len(final.candidates)],
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
    from ctrnas.pipeline.report import write_json
    from ctrnas.search import plots

    rows = front_rows(recipe, final, data.schema)
    cands = [r for r in rows if r["kind"] == "candidate"]
    content = {"objective": "validation log loss against embedding bytes (float32 tables)",
               "kept_weights": recipe.search.evolution.objective == "front", "models": rows}
    write_json(Path(out) / FRONT_FILE, content)
    value = lambda x: float(x) if x is not None else math.nan  # noqa: E731
    plots.plot_pareto([value(r["embedding_bytes"]) for r in cands], [value(r["val_logloss"]) for r in cands],
                      Path(out) / "plots" / "front.png", xlabel="embedding bytes", ylabel="validation log loss",
                      points={r["label"]: (value(r["embedding_bytes"]), value(r["val_logloss"]))
                              for r in rows if r["kind"] == "baseline"})
    return content


def front_lines(content: dict) -> list[str]:
    """The summary's table of the front (pick numbers for `ctrnas export --pick`)."""
    from ctrnas.pipeline.report import _fmt

    on = sorted((r for r in content["models"] if r["on_front"]), key=lambda r: r["pick"])
    lines = ["", "## Front: validation log loss against embedding bytes", "",
             "`ctrnas export --run RUN --pick N --out FOLDER` exports model N"
             + ("." if content["kept_weights"] else " (needs `search.evolution.objective: front`, which keeps "
                "every model's weights)."), "",
             "| pick | model | embedding MB | val log loss | test log loss | dropped fields |",
             "|---|---|---|---|---|---|"]
    for r in on:
        mb = r["embedding_bytes"] / 1e6 if r["embedding_bytes"] is not None else None
        drop = ", ".join(r["dropped_fields"]) or "-"
        lines.append(f"| {r['pick']} | {r['label']} | {_fmt(mb, 3)} | {_fmt(r['val_logloss'])} | "
                     f"{_fmt(r['test_logloss'])} | {drop} |")
    return lines
