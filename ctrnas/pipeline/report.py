"""The results folder of a run: files a program reads (JSON/CSV) and a person reads (summary.md, PNGs).

    recipe.yaml        the resolved recipe (loads back to the same Recipe)
    environment.json   package versions and seeds (FuxiCTR habit)
    search/history.csv every candidate: fitness, score terms, params, FLOPs, time  (+ history.json)
    best_arch.json     the architecture picked by validation after retraining (absent after a fallback)
    model/             the exported model (ctrnas.supernet.save_exported; a baseline after a fallback)
    metrics.json       everything below as data
    summary.md         the tables
    plots/best_so_far.png, plots/score_vs_test.png, plots/pareto.png
    front.json, plots/front.png   with per-table widths or a front search: log loss against embedding bytes
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from ctrnas.data.dataset import versions
from ctrnas.errors import RecipeError
from ctrnas.files import atomic_write_text
from ctrnas.pipeline.results import FinalResult, RunResult, TrainedModel
from ctrnas.recipe import Recipe, dump_recipe
from ctrnas.search.history import non_finite_reason
from ctrnas.train.metrics import strict_json


def write_json(path: Path, obj) -> None:
    """Strict JSON (NaN/inf written as null), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, strict_json(obj) + "\n")


def model_row(m: TrainedModel, emb_dim: int) -> dict:
    """One trained model as metrics.json and models.csv list it; `emb_dim` is the run's table width, which an
    arch without its own (`Arch.emb_dim`) and every baseline train at."""
    d = m.diverged or {}
    width = m.arch.emb_dim if m.arch is not None and m.arch.emb_dim is not None else emb_dim
    return {"label": m.label, "arch_key": m.arch.key() if m.arch is not None else None, "emb_dim": width,
            "fitness": m.score, "history_index": m.history_index, "params": m.params,
            "params_embedding": m.emb_params, "flops": m.flops,
            "val_logloss": m.val.get("logloss"), "val_auc": m.val.get("auc"),
            "test_logloss": m.test.get("logloss"), "test_auc": m.test.get("auc"), "train_seconds": m.seconds,
            "status": m.status, "constant_val_logloss": m.constant_val_logloss,
            "diverged_step": d.get("step"), "note": d.get("reason") or m.val.get("reason")}


def baseline_width(label: str, run: int) -> int:
    """The table width a baseline trained at: "dlrm at width 32" (`final.emb_dims`) or the run's."""
    head, sep, width = label.rpartition(" at width ")
    return int(width) if sep and width.isdigit() else run


def lr_reference(baselines: list[dict]) -> dict | None:
    """The LR baseline a run's "gap closed" reads: of the LR trainings at the run's width (`lr`, and `lr*S` at
    other learning rates), the one with the lowest validation log loss, so a learning rate too small for LR's
    one-wide tables does not inflate every model's share. `baselines`: rows with label, val_logloss."""
    from ctrnas.train.baseline_names import baseline_key, split_lr_scale

    def is_lr(label: str) -> bool:
        name, at, _ = label.partition(" at width ")
        try:
            return not at and baseline_key(split_lr_scale(name)[0]) == "lr"
        except RecipeError:
            return False

    rows = [b for b in baselines if is_lr(b["label"])]
    usable = [b for b in rows if _finite(b.get("val_logloss"))]
    return min(usable, key=lambda b: b["val_logloss"]) if usable else (rows[0] if rows else None)


def gap_closed(found: float, lr: float | None, bayes: float | None) -> float | None:
    """Share of the gap between logistic regression and the Bayes optimum that the found model closes."""
    if lr is None or bayes is None or not (lr - bayes) > 0:
        return None
    return (lr - found) / (lr - bayes)


def build_metrics(recipe: Recipe, run: RunResult | None = None, *, data=None, warm=None, search=None,
                  final: FinalResult | None = None, timings: dict | None = None, cpu: dict | None = None,
                  compute: dict | None = None) -> dict:
    """The metrics.json content of a run (usable before the RunResult exists)."""
    if run is not None:
        data, warm, search, final, timings = run.data, run.warmup, run.search, run.final, run.timings
    bayes = (data.bayes_logloss or {}).get("test") if data is not None else None
    ref = lr_reference([{"label": b.label, "val_logloss": b.val.get("logloss"), "test_logloss": b.test.get("logloss")}
                        for b in final.baselines])
    lr = ref["test_logloss"] if ref is not None else None
    best = final.best
    hist = search.history
    found = best.test.get("logloss", math.nan)
    models = list(final.candidates) + list(final.baselines)
    width = recipe.train.embedding_dim  # an arch without its own: the template's (supernet's) width
    return {
        "name": recipe.name,
        "setting": {"warmup_fraction": warm.fraction, "fitness": search.fitness,
                    "fitness_name": search.fitness_name, "maximize": search.maximize, "rows": search.rows_note},
        "data": {"path": str(data.path), "rows": {s: v.get("rows") for s, v in data.meta["splits"].items()},
                 "bayes_logloss": data.bayes_logloss},
        "warmup": {"rows": warm.rows, "steps": warm.steps, "seconds": warm.seconds},
        "search": {"evaluations": len(hist), "distinct": len(hist.keys()),
                   "cache_hits": sum(1 for r in hist if r.cached),
                   "non_finite": sum(1 for r in hist if not math.isfinite(r.value)),
                   "non_finite_candidates": [{"index": r.index, "key": r.key, "reason": non_finite_reason(r)}
                                             for r in hist if not math.isfinite(r.value)],
                   "best_fitness": search.result.best.value if search.result.best else None,
                   "ladder": ladder_check(search, final),
                   "lineage": search_lineage(search, recipe.seed_names),
                   "predictor": search.predictor,
                   "field_probe": search.fields},
        "best": {**model_row(best, width), "arch": best.arch.to_json() if best.arch is not None else None},
        "fallback": final.fallback,
        "twins": final.twins,
        "origin": final.origin,
        "diverged": [{"label": m.label, "step": m.diverged["step"], "reason": m.diverged["reason"]}
                     for m in models if m.diverged],
        "found_worse_than_lr": (found > lr and best.label != ref["label"])
        if lr is not None and math.isfinite(found) and math.isfinite(lr) else None,
        "candidates": [model_row(m, width) for m in final.candidates],
        "baselines": [model_row(m, baseline_width(m.label, recipe.final_train.embedding_dim))
                      for m in final.baselines],
        "bayes_test_logloss": bayes,
        "gap_closed_vs_lr": gap_closed(found, lr, bayes),
        "gap_closed_lr": ref["label"] if ref is not None else None,  # which LR training it read (`lr_reference`)
        "timings": timings or {},
        "cpu_seconds": cpu or {},
        "compute": compute or {},  # training samples and full-training equivalents per stage (pipeline.budget)
        **({"final_distributed": final.distributed} if final.distributed is not None else {}),
    }


def search_lineage(search, given: tuple[str, ...] = ()) -> dict:
    """Children per seed and against their parents (`ctrnas.pipeline.origin.lineage`); `given`: the recipe's
    `search.seeds`."""
    from ctrnas.pipeline.origin import lineage

    first = search.rung_maximize[0] if search.rung_maximize is not None else search.maximize
    return lineage(search.history, first, given)


def search_lines(search: dict) -> list[str]:
    """The summary's lines on the search's own checks: the ladder, the predictor, the children."""
    lines = []
    if search.get("ladder"):
        parts = [f"{c['from']} -> {c['to']}: tau {_fmt(c['tau'], 2)} (n {c['n']})" for c in search["ladder"]]
        lines.append("- ladder self-check (Kendall tau between consecutive steps): " + "; ".join(parts))
    p = search.get("predictor")
    if p:
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(p["importances"].items())[:5])
        mode = ", relative to the parent" if p.get("relative") else ""
        change = (f"; tau of the predicted change from the parent {_fmt(p['unseen_change_tau'], 2)} "
                  f"(n {p['unseen_change_n']}), of the parent's own score "
                  f"{_fmt(p.get('unseen_parent_tau', math.nan), 2)}" if p.get("unseen_change_n") else "")
        lines.append(f"- predictor ({p['model']}{mode}): tau on candidates it had not seen "
                     f"{_fmt(p['unseen_tau'], 2)} (n {p['unseen_n']}){change}; top importances: {top or '-'}")
    if search.get("field_probe"):
        lines.append("- " + probe_line(search["field_probe"]))
    g = search.get("lineage") or {}
    if g.get("children"):
        roots = ", ".join(f"{k} {v}" for k, v in sorted(g["descend_from"].items()))
        lines.append(f"- evolution: {g['children']} children ({roots}); {g['better_than_parent']} of "
                     f"{g['compared']} better than their parent at the first rung")
    return lines


def probe_line(record: dict) -> str:
    """One console line: how many fields showed no signal, and which."""
    quiet = [r["field"] for r in record["fields"] if not r["signal"]]
    n = len(record["fields"])
    if not record.get("learnt", True):
        return (f"field probe ({record['train_rows']} training rows, {record['val_rows']} val rows): no field's "
                f"shuffle raised the log loss by {record['settings']['min_rise']:g} (largest rise "
                f"{record['top_rise']:.2g}): the short training has not learnt the tables, no field is dropped")
    names = ", ".join(quiet[:12]) + (f" and {len(quiet) - 12} more" if len(quiet) > 12 else "")
    return (f"field probe ({record['train_rows']} training rows, {record['val_rows']} val rows; signal: a shuffle "
            f"raises the log loss by > {record['z']:g} se and >= {record['min_rise']:.2g}): {len(quiet)} of {n} "
            "fields show none" + (f": {names}" if quiet else ""))


def ladder_check(search, final: FinalResult) -> list[dict] | None:
    """The ladder's self-check (multi-fidelity searches): Kendall's tau between consecutive rungs over the
    candidates scored at both, then between the last rung and the final stage's validation log loss over
    the retrained candidates scored at the last rung. tau near 0 or below: the cheaper step does not rank."""
    if search.rung_maximize is None:
        return None
    from ctrnas.search.multifidelity import ladder_agreement
    from ctrnas.search.predictor import kendall_tau

    checks = ladder_agreement(search.history, list(search.rung_maximize))
    last = len(search.rung_maximize) - 1
    hist = search.history
    pairs = [(hist[m.history_index].value, m.val.get("logloss", math.nan)) for m in final.candidates
             if m.history_index is not None and hist[m.history_index].rung == last and "width_of" not in
             hist[m.history_index].meta and m.arch is not None and m.arch.key() == hist[m.history_index].key]
    sign = 1.0 if search.rung_maximize[last] else -1.0  # both sides as "higher is better"
    checks.append({"from": last, "to": "final", "n": len(pairs),
                   "tau": kendall_tau([sign * a for a, _ in pairs], [-b for _, b in pairs])})
    return checks


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _fmt(x, digits: int = 5) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def summary_markdown(metrics: dict) -> str:
    s = metrics["setting"]
    lines = [f"# ctrnas run `{metrics['name']}`", ""]
    if metrics.get("origin"):
        lines += [f"**{metrics['origin']['line']}**", ""]
    lines += [f"- warm-up fraction {s['warmup_fraction']:g}, fitness: {s['fitness']} ({s['fitness_name']}); "
             f"{s['rows']}",
             f"- search: {metrics['search']['evaluations']} evaluations ({metrics['search']['distinct']} distinct, "
             f"{metrics['search']['non_finite']} non-finite), best fitness {_fmt(metrics['search']['best_fitness'])}",
             f"- {'reported (fallback baseline)' if metrics.get('fallback') else 'best (by validation)'}: "
             f"`{metrics['best']['arch_key'] or metrics['best']['label']}`, test log loss "
             f"**{_fmt(metrics['best']['test_logloss'])}**, AUC {_fmt(metrics['best']['test_auc'])}"]
    lines += vs_baselines(metrics["best"], metrics["baselines"])
    lines += search_lines(metrics["search"])
    if metrics.get("fallback"):
        lines.append(f"- **fallback**: {metrics['fallback']}")
    if metrics.get("twins"):
        lines.append(f"- trained once, as its baseline: {twins_text(metrics['twins'])}")
    for d in metrics.get("diverged") or []:
        lines.append(f"- **diverged**: {d['label']} stopped at step {d['step']}: {d['reason']}")
    if metrics.get("found_worse_than_lr"):
        lines.append("- **the reported model is worse than logistic regression (LR) on test**")
    if metrics.get("final_distributed"):
        d = metrics["final_distributed"]
        lines.append(f"- final stage trained on {d['world_size']} ranks ({d['backend']}; embedding tables "
                     f"sharded by {d['sharding']})")
    if metrics.get("bayes_test_logloss") is not None:
        lines.append(f"- Bayes-optimal test log loss (synthetic click model): {_fmt(metrics['bayes_test_logloss'])}")
    if metrics.get("gap_closed_vs_lr") is not None:
        which = metrics.get("gap_closed_lr")
        which = f" (LR: {which}, the best LR on validation)" if which and which != "lr" else ""
        lines.append(f"- share of the LR-to-Bayes gap closed: {metrics['gap_closed_vs_lr']:.1%}{which}")
    lines += ["", "## Retrained top-k and baselines", "",
              "| model | fitness | params: dense + embedding | MFLOPs | val log loss | test log loss | test AUC | "
              "train s | status |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in metrics["candidates"] + metrics["baselines"]:
        mark = " (best)" if r["label"] == metrics["best"]["label"] else ""
        flops = r["flops"] / 1e6 if _finite(r["flops"]) else None
        lines.append(f"| {r['label']}{mark} | {_fmt(r['fitness'], 4)} | {params_text(r)} | "
                     f"{_fmt(flops, 3)} | {_fmt(r['val_logloss'])} | {_fmt(r['test_logloss'])} | "
                     f"{_fmt(r['test_auc'])} | {_fmt(r['train_seconds'], 1)} | {r['status']} |")
    if metrics.get("front"):
        lines += front_lines(metrics["front"])
    cpu = metrics.get("cpu_seconds") or {}
    lines += ["", "## Time per stage (s)", "", "| stage | wall | CPU (with joined workers) |", "|---|---|---|"]
    lines += [f"| {k} | {v:.1f} | {_fmt(cpu.get(k), 1)} |" for k, v in metrics["timings"].items()]
    lines += compute_lines(metrics.get("compute") or {}, metrics["timings"])
    lines += ["", "Files: `search/history.csv`, `best_arch.json`, `model/`, `metrics.json`, `plots/*.png`, "
              "`recipe.yaml`, `environment.json`.", ""]
    return "\n".join(lines)


def _count(n) -> str:
    """A parameter count for people: 15, 8.2k, 3.3M."""
    n = float(n)
    return f"{n / 1e6:.3g}M" if n >= 1e6 else f"{n / 1e3:.3g}k" if n >= 1e4 else f"{n:.0f}"


def params_text(row: dict) -> str:
    """"887k + 3.3M": dense and embedding parameters, so an LR's 15 dense ones are not read as its size."""
    dense, emb = row.get("params"), row.get("params_embedding")
    if not _finite(dense):
        return "-"
    return _count(dense) + (f" + {_count(emb)}" if _finite(emb) else "")


def vs_baselines(best: dict, baselines: list[dict]) -> list[str]:
    """The summary's line comparing the reported model's test log loss with LR's and the best baseline's."""
    lines = baseline_lines([b for b in baselines if b["label"] != best["label"]])
    if not lines or not _finite(best["test_logloss"]):
        return []
    parts = [f"{label.rsplit(' ', 1)[0]} {y:.5f} ({best['test_logloss'] - y:+.5f})" for label, y in lines.items()]
    return [f"- test log loss against {', '.join(parts)}"]


def compute_lines(compute: dict, timings: dict) -> list[str]:
    """The summary's table of training samples and full-training equivalents (FTE) per stage."""
    if not compute.get("fte"):
        return []
    lines = ["", "## Compute per stage (full-training equivalents)", "",
             "| stage | training samples | FTE | wall s |", "|---|---|---|---|"]
    for k, n in compute["samples"].items():
        wall = "(in final)" if k == "baselines" else _fmt(timings.get(k), 1)
        lines.append(f"| {k} | {n} | {compute['fte'][k]:.3f} | {wall} |")
    lines += [f"| total | {sum(compute['samples'].values())} | {compute['fte']['total']:.3f} | "
              f"{_fmt(timings.get('total'), 1)} |", "",
              f"1 FTE = {compute['unit_samples']} samples, one final-stage training of one model (`final`: the "
              "retrained top-k, `baselines` apart; search: proxy batches, fine-tuning steps and short trainings)."]
    return lines


def write_candidates_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_environment(out: Path, recipe: Recipe) -> None:
    """The resolved recipe, seeds and package versions beside the results."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "recipe.yaml", dump_recipe(recipe))
    seeds = {"recipe": recipe.seed, "warmup_train": recipe.train.seed, "final_train": recipe.final_train.seed}
    if recipe.data.synthetic is not None:
        seeds["synthetic_data"] = recipe.data.synthetic.seed
    write_json(out / "environment.json", {"versions": versions(), "seeds": seeds, "recipe_source": recipe.source})


def plot_data(metrics: dict) -> dict:
    """What the summary plots draw: the retrained top-k's fitness, test log loss and params, and `lines`, the
    test log loss of LR and of the best baseline (by test log loss) as horizontal references."""
    cands = metrics["candidates"]
    value = lambda r, k: r[k] if r[k] is not None else math.nan  # noqa: E731
    return {"scores": [value(c, "fitness") for c in cands], "tests": [value(c, "test_logloss") for c in cands],
            "params": [value(c, "params") for c in cands], "lines": baseline_lines(metrics["baselines"])}


def baseline_lines(baselines: list[dict]) -> dict[str, float]:
    """{label: test log loss} of LR and the best baseline (one line when LR is the best)."""
    rows = [b for b in baselines if _finite(b["test_logloss"])]
    if not rows:
        return {}
    best = min(rows, key=lambda b: b["test_logloss"])
    lr = lr_reference(rows)
    name = "LR" if lr is None or lr["label"] == "lr" else f"LR ({lr['label']})"
    lines = {} if lr is None or lr is best else {f"{name} {lr['test_logloss']:.4f}": lr["test_logloss"]}
    lines[f"best baseline ({best['label']}) {best['test_logloss']:.4f}"] = best["test_logloss"]
    return lines


def fitness_label(kind: str, recipe: Recipe | None = None, budget: int | None = None) -> str:
    """What a fitness value is, with its unit and direction, for a plot's axis."""
    if kind == "short":
        rows = f" on {budget:,} rows" if budget else ""
        return f"val log loss after 1 epoch{rows} (lower is better)"
    if kind == "prefix":
        steps = f" {budget:,}" if budget else ""
        return f"val log loss after the first{steps} steps of the final training (lower is better)"
    if kind == "inherit":
        steps = f" {budget:,}" if budget else ""
        return f"val log loss after its line's first{steps} steps and its own extra steps (lower is better)"
    if kind == "oneshot":
        return "inherited-weight val log loss (lower is better)"
    if kind == "random":
        return "random draw (a control)"
    name = recipe.proxy.name if recipe is not None and kind == "proxy" else kind
    return f"{name} score (higher is better)"


def rung_labels(search, recipe: Recipe | None, data) -> list[str] | None:
    """One axis label per rung of a multi-fidelity search (None for a single-fidelity one)."""
    if search.rung_maximize is None:
        return None
    names = search.fitness_name.split(" > ")
    if recipe is None or data is None:
        return names
    budgets: dict[int, int | None] = {}
    for r in search.history:  # each rung's budget as the search recorded it
        budgets.setdefault(r.rung, r.budget)
    return [fitness_label(name, recipe, budgets.get(i)) for i, name in enumerate(names)]


def seeded_marks(history, recipe: Recipe | None) -> dict[str, dict]:
    """{shipped arch name: {rung: its value}} for the hand-designed archs a search's population started from."""
    if recipe is None or not recipe.search.seed_population:
        return {}
    from ctrnas.space.baselines import load_arch

    marks: dict[str, dict] = {}
    for name in recipe.seed_names:
        key = load_arch(name).key()
        for r in history:
            if r.key == key and _finite(r.value):
                marks.setdefault(f"seeded {name}", {}).setdefault(r.rung, r.value)
    return marks


def pareto_points(metrics: dict) -> dict[str, tuple[float, float]]:
    """The found model and each baseline as labelled (dense params, test log loss) points."""
    value = lambda r, k: float(r[k]) if _finite(r.get(k)) else math.nan  # noqa: E731
    best = metrics["best"]
    points = {f"found ({best['label']})": (value(best, "params"), value(best, "test_logloss"))}
    for b in metrics["baselines"]:
        points[b["label"]] = (value(b, "params"), value(b, "test_logloss"))
    return points


def write_plots(out: Path, metrics: dict, search, recipe: Recipe | None = None, data=None) -> dict[str, str]:
    from ctrnas.search import plots

    made = {}
    names = rung_labels(search, recipe, data)
    single = fitness_label(search.fitness, recipe) if search.rung_maximize is None else search.fitness_name
    made["best_so_far"] = str(plots.plot_best_so_far({search.fitness_name: search.history}, out / "best_so_far.png",
                                                     search.maximize, ylabel=single,
                                                     rung_maximize=search.rung_maximize, rung_names=names,
                                                     marks=seeded_marks(search.history, recipe)))
    d = plot_data(metrics)
    made["score_vs_test"] = str(plots.plot_score_vs_metric(
        d["scores"], d["tests"], out / "score_vs_test.png", xlabel=f"search fitness ({search.fitness_name})",
        ylabel="test log loss (from scratch)", title=f"retrained top-{len(d['tests'])}", lines=d["lines"]))
    made["pareto"] = str(plots.plot_pareto(d["params"], d["tests"], out / "pareto.png",
                                           xlabel="parameters (excl. embeddings)", ylabel="test log loss",
                                           points=pareto_points(metrics)))
    return made


def write_report(out: Path, recipe: Recipe, run_parts: dict) -> dict:
    """Write the whole results folder; returns the metrics dict (also in metrics.json)."""
    out = Path(out)
    search, final = run_parts["search"], run_parts["final"]
    write_environment(out, recipe)
    (out / "search").mkdir(parents=True, exist_ok=True)
    search.history.to_csv(out / "search" / "history.csv")
    search.history.to_json(out / "search" / "history.json")
    metrics = build_metrics(recipe, **run_parts)
    if final.best.arch is not None:
        write_json(out / "best_arch.json", final.best.arch.to_json())
    write_candidates_csv(out / "final" / "models.csv", metrics["candidates"] + metrics["baselines"])
    metrics["plots"] = write_plots(out / "plots", metrics, search, recipe, run_parts.get("data"))
    if recipe.space.table_dims or recipe.search.evolution.objective == "front":
        from ctrnas.pipeline.front import write_front

        metrics["front"] = write_front(out, recipe, final, run_parts["data"])
        metrics["plots"]["front"] = str(out / "plots" / "front.png")
    metrics["export_dir"] = str(final.export_dir) if final.export_dir is not None else None
    write_json(out / "metrics.json", metrics)
    atomic_write_text(out / "summary.md", summary_markdown(metrics))
    return metrics


def front_lines(content: dict) -> list[str]:
    """The summary's table of the front (pick numbers for `ctrnas export --pick`)."""
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


def twins_text(twins: dict) -> str:
    """"rank 0 (dlrm-like) is the dlrm baseline" for each top-k candidate the final stage trained as a baseline."""
    return "; ".join(f"{label} is the {base} baseline" for label, base in twins.items())
