"""The summary plots and summary.md show the baselines beside the found model: LR and the best baseline."""

import math
from pathlib import Path

import pytest

from ctrnas.pipeline.report import plot_data, summary_markdown, vs_baselines


ROOT = Path(__file__).resolve().parents[2]


def _row(label, test, fitness=None, params=10.0):
    return {"label": label, "arch_key": None if fitness is None else f"k{label}", "fitness": fitness,
            "history_index": None, "params": params, "flops": math.nan, "val_logloss": test,
            "val_auc": 0.7, "test_logloss": test, "test_auc": 0.7, "train_seconds": 1.0, "status": "ok",
            "constant_val_logloss": 0.6, "diverged_step": None, "note": None}


def _metrics(baselines):
    cands = [_row("rank 0", 0.44, fitness=0.5, params=100.0), _row("rank 1", 0.43, fitness=0.6, params=50.0)]
    return {"name": "t", "setting": {"warmup_fraction": 0.01, "fitness": "proxy", "fitness_name": "sigeo",
                                     "rows": ""},
            "search": {"evaluations": 2, "distinct": 2, "non_finite": 0, "best_fitness": 0.6},
            "best": {**cands[1], "arch_key": "k1"}, "candidates": cands, "baselines": baselines,
            "timings": {}, "cpu_seconds": {}}


def test_plot_data_has_lines_for_lr_and_the_best_baseline_by_test_log_loss():
    base = [_row("lr", 0.45), _row("dlrm", 0.432), _row("dcnv2", 0.429), _row("fm", math.nan)]
    d = plot_data(_metrics(base))
    assert d["lines"] == {"LR 0.4500": 0.45, "best baseline (dcnv2) 0.4290": 0.429}
    assert d["tests"] == [0.44, 0.43] and d["scores"] == [0.5, 0.6] and d["params"] == [100.0, 50.0]


def test_lr_as_the_best_baseline_is_one_line_and_no_baselines_none():
    assert plot_data(_metrics([_row("lr", 0.42), _row("dlrm", 0.43)]))["lines"] == {"best baseline (lr) 0.4200": 0.42}
    assert plot_data(_metrics([]))["lines"] == {}


def test_summary_compares_the_found_model_with_lr_and_the_best_baseline():
    base = [_row("lr", 0.45), _row("dlrm", 0.432), _row("dcnv2", 0.429)]
    text = summary_markdown(_metrics(base))
    assert "- test log loss against LR 0.45000 (-0.02000), best baseline (dcnv2) 0.42900 (+0.00100)" in text
    assert "| dcnv2 | - | 10 |" in text and "| rank 1 (best) |" in text  # the table lists them side by side
    # a fallback reports a baseline: it is compared with the others, not with itself
    fallback = {**_row("dcnv2", 0.429)}
    assert vs_baselines(fallback, base) == ["- test log loss against LR 0.45000 (-0.02100), "
                                            "best baseline (dlrm) 0.43200 (-0.00300)"]


def test_the_plots_draw_the_baseline_lines(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from ctrnas.search import plots

    drawn = []
    orig = Figure.savefig

    def keep(fig, *a, **k):
        ax = fig.axes[0]
        drawn.append(sorted((ln.get_label(), ln.get_ydata()[0]) for ln in ax.get_lines() if ln.get_linestyle() == "--"))
        return orig(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    lines = {"LR 0.4500": 0.45, "best baseline (dcnv2) 0.4290": 0.429}
    plots.plot_score_vs_metric([0.5, 0.6, 0.7], [0.44, 0.43, 0.435], tmp_path / "s.png", lines=lines)
    plots.plot_pareto([100, 50, 70], [0.44, 0.43, 0.435], tmp_path / "p.png", lines=lines)
    want = sorted(lines.items())
    assert drawn == [want, want]
    assert (tmp_path / "s.png").stat().st_size > 0 and (tmp_path / "p.png").stat().st_size > 0


def test_pareto_labels_the_found_model_and_every_baseline(monkeypatch, tmp_path):
    from matplotlib.figure import Figure

    from ctrnas.pipeline.report import pareto_points
    from ctrnas.search import plots

    metrics = _metrics([_row("lr", 0.45, params=15.0), _row("dlrm", 0.432, params=90.0)])
    points = pareto_points(metrics)
    assert points == {"found (rank 1)": (50.0, 0.43), "lr": (15.0, 0.45), "dlrm": (90.0, 0.432)}
    texts, orig = [], Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **k: texts.append(
        sorted(t.get_text() for t in fig.axes[0].texts)) or orig(fig, *a, **k))
    plots.plot_pareto([100, 50], [0.44, 0.43], tmp_path / "p.png", points=points)
    assert texts == [sorted(points)]


def test_fitness_axes_say_their_unit_and_direction():
    from ctrnas.pipeline.report import fitness_label

    assert fitness_label("short", budget=24000) == "val log loss after 1 epoch on 24,000 rows (lower is better)"
    assert fitness_label("oneshot") == "inherited-weight val log loss (lower is better)"
    assert fitness_label("proxy").endswith("score (higher is better)")


def test_seeded_archs_are_marked_at_the_rungs_they_were_scored_at():
    from ctrnas.pipeline.report import seeded_marks
    from ctrnas.recipe import load_recipe
    from ctrnas.search.history import History, HistoryRecord
    from ctrnas.space.baselines import baseline_arch

    recipe = load_recipe(ROOT / "recipes" / "synthetic.yaml")
    key = baseline_arch("dcnv2-like").key()
    h = History([HistoryRecord(0, 0, key, {}, 0.47, rung=0), HistoryRecord(1, 0, "other", {}, 0.40, rung=0),
                 HistoryRecord(2, 1, key, {}, 0.44, rung=1)])
    assert seeded_marks(h, recipe) == {"seeded dcnv2-like": {0: 0.47, 1: 0.44}}


def test_lr_at_several_learning_rates_the_reference_is_the_best_on_validation():
    """`final.baselines: [lr, lr*2.5, lr*8]`: LR's gap-closed reference and plot line are the LR training with
    the lowest validation log loss (its test may be worse), never an LR at another width or another model."""
    from ctrnas.pipeline.report import gap_closed, lr_reference

    lr, lr8 = {**_row("lr", 0.46), "val_logloss": 0.47}, {**_row("lr*8", 0.45), "val_logloss": 0.44}
    lr25 = {**_row("lr*2.5", 0.44), "val_logloss": 0.45}  # better on test, worse on validation than lr*8
    wide = {**_row("lr*8 at width 32", 0.40), "val_logloss": 0.40}
    base = [lr, lr25, lr8, wide, _row("dlrm", 0.43)]
    assert lr_reference(base) is lr8
    assert lr_reference([_row("dlrm", 0.43)]) is None
    assert plot_data(_metrics(base))["lines"]["LR (lr*8) 0.4500"] == 0.45
    assert gap_closed(0.43, lr_reference(base)["test_logloss"], 0.40) == pytest.approx((0.45 - 0.43) / 0.05)
