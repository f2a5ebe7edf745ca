"""NB201 benchmark: proxy/accuracy rank correlation on real CIFAR-10 images, next to SiGeo Tables 2-3.

    .venv/bin/python benchmarks/nb201.py --archs 300 --warmup-archs 100 [--time-limit 5400]
    .venv/bin/python benchmarks/nb201.py --report-only       # summarise whatever the CSV holds

Scores are appended to benchmarks/out/nb201_scores.csv (resumable: re-run the same command to continue);
the summary goes to stdout and to benchmarks/sections/nb201.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRAIN = ROOT / "../shared/data/cifar10/cifar10_train_first4000.npz"
TABLE = ROOT / "../shared/data/nb201/nb201_acc.csv"
OUT = ROOT / "benchmarks/out"
SECTION = ROOT / "benchmarks/sections/nb201.md"

# SiGeo Table 2 (zero-shot) and Table 3 (warm-up), NB201-CIFAR-10: (Spearman, Kendall).
PAPER = {
    ("sigeo", 0.0): (0.78, 0.58), ("zico", 0.0): (0.74, 0.54), ("sigeo.zico", 0.0): (0.74, 0.54),
    ("synflow", 0.0): (0.73, 0.54), ("nwot", 0.0): (0.77, 0.58), ("params", 0.0): (0.72, 0.54),
    ("sigeo", 0.1): (0.83, 0.64), ("zico", 0.1): (0.78, 0.58), ("sigeo.zico", 0.1): (0.78, 0.58),
    ("sigeo", 0.2): (0.84, 0.65), ("zico", 0.2): (0.77, 0.57), ("sigeo.zico", 0.2): (0.77, 0.57),
    ("sigeo", 0.4): (0.83, 0.64), ("zico", 0.4): (0.78, 0.58), ("sigeo.zico", 0.4): (0.78, 0.58),
}
# Metrics of the warm-up tables, each over all levels: SiGeo at the paper's CV weights and at others
# (recombined from its stored terms), its terms, and the FR term / SiGeo with the per-sample Fisher.
WARM_METRICS = ["sigeo", "sigeo@1,1,0", "sigeo@1,1,1", "sigeo.zico", "sigeo.fr", "sigeo.loss",
                "frnorm.fr_sample", "frnorm.dot_mean", "sigeo_ps@1,50,1", "sigeo_ps@1,1,1"]
EXTRA_METRICS = ["sigeo", "sigeo@1,1,1", "sigeo.zico", "sigeo.fr", "sigeo.loss", "frnorm.fr_sample", "sigeo_ps@1,50,1"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", type=int, default=300)
    ap.add_argument("--warmup-archs", type=int, default=100)
    ap.add_argument("--warmup", default="0,0.1")
    ap.add_argument("--extra-warmup", default="",
                    help="report only: further levels (e.g. 1.25 = several epochs of the sample), each in its own "
                         "table with the main levels, on the cells that have it")
    ap.add_argument("--proxies", default="sigeo,synflow,nwot,params")
    ap.add_argument("--warmup-proxies", default="sigeo")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=None, help="stop starting new cells after this many seconds")
    ap.add_argument("--csv", default=str(OUT / "nb201_scores.csv"),
                    help="scores CSV (written); further comma-separated CSVs are only read for the report")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--state-dir", default=None,
                    help="keep warmed-up networks here (reused by later runs on the same cells and levels)")
    ap.add_argument("--reverse", action="store_true", help="score the sample from its last cell (second worker)")
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--search", action="store_true", help="run the proxy-driven evolution searches instead")
    ap.add_argument("--search-seeds", default="0,1,2")
    ap.add_argument("--search-budget", default="10,5,3,4", help="population,generations,tournament,children")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (auto: CUDA when torch sees one)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; 1 because on shared cores OpenMP spinning cost ~10x the CPU time here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)

    from ctrnas.vision.cifar import read_npz, to_tensor
    from ctrnas.vision.correlate import CorrelateConfig, format_markdown, plot_scatter, read_rows, run_correlation, summarize
    from ctrnas.vision.space import NB201Table

    if not TRAIN.exists() or not TABLE.exists():
        print(f"shared data missing ({TRAIN} / {TABLE}); nothing to do", file=sys.stderr)
        return 1
    table = NB201Table.load(TABLE)
    warmups = [float(w) for w in args.warmup.split(",")]
    cfg = CorrelateConfig(
        archs=args.archs, proxies=tuple(args.proxies.split(",")), warmup=tuple(warmups),
        warmup_archs=args.warmup_archs, warmup_proxies=tuple(args.warmup_proxies.split(",")), seed=args.seed,
        reverse=args.reverse,
    )
    t0 = time.perf_counter()
    if args.search:
        return run_searches(args, table)
    if not args.report_only:
        x, y = to_tensor(read_npz(TRAIN), "cifar10")
        run_correlation(cfg, x, y, table, args.csv.split(",")[0], progress=True, time_limit_s=args.time_limit,
                        state_dir=args.state_dir, done_csvs=tuple(args.csv.split(",")[1:]), device=args.device)
    rows = [r for path in args.csv.split(",") for r in read_rows(path)]
    if not rows:
        print("no scores yet")
        return 0

    zero_metrics = [p for p in cfg.proxies] + (["sigeo.zico", "sigeo.fr"] if "sigeo" in cfg.proxies else [])
    summary = summarize(rows, table, zero_metrics, [0.0], n_boot=args.n_boot, seed=args.seed)
    # Warm-up comparison on the cells that have every level (paired: same cells, same initial weights).
    levels = {}
    for r in rows:
        if r["proxy"] == "sigeo":
            levels.setdefault(r["arch"], set()).add(float(r["warmup"]))
    paired = {a for a, ls in levels.items() if set(warmups) <= ls}
    warm_summary = [row for m in WARM_METRICS for row in summarize(
        rows, table, [m], warmups, archs=paired, subset="warm-up cells", n_boot=args.n_boot, seed=args.seed)]
    extra_levels = [float(w) for w in args.extra_warmup.split(",") if w.strip()]
    extra_blocks = []
    for xw in extra_levels:
        cells = {a for a, ls in levels.items() if set(warmups) | {xw} <= ls}
        lv = sorted(set(warmups) | {xw})
        extra = [row for m in EXTRA_METRICS for row in summarize(
            rows, table, [m], lv, archs=cells, subset=f"cells with {xw:g}", n_boot=args.n_boot, seed=args.seed)]
        extra_blocks += [f"#### Additional level {xw:g} (not the paper's: {round(xw * 4000)} images = {xw:g} passes "
                         f"over the 4000-image sample), on the {len(cells)} cells that have it", "",
                         format_markdown(extra, PAPER), "", rise_table(rows, table, lv, cells, args, only=(xw,)), ""]

    # Time per cell: the sum of the proxy times of one cell at zero-shot, and the warm-up pass.
    per_cell: dict[str, float] = {}
    warm_s, warm_score_s = [], []
    warm_by_level: dict[float, tuple[list, list]] = {}
    last = {(r["arch"], float(r["warmup"]), r["proxy"]): r for r in rows}
    for r in last.values():
        if float(r["warmup"]) == 0:
            if r["proxy"] in cfg.proxies:
                per_cell[r["arch"]] = per_cell.get(r["arch"], 0.0) + float(r["time_s"])
        elif r["proxy"] == "sigeo":
            ws, ss = warm_by_level.setdefault(float(r["warmup"]), ([], []))
            ws.append(float(r["warmup_s"]))
            ss.append(float(r["time_s"]))
    by_proxy = {}
    for r in rows:
        if float(r["warmup"]) == 0:
            by_proxy.setdefault(r["proxy"], []).append(float(r["time_s"]))
    from ctrnas.vision.warmup import warmup_steps

    OUT.mkdir(parents=True, exist_ok=True)
    plot_scatter(rows, table, zero_metrics[:6], 0.0, "cifar10", OUT / "nb201_scatter_zero_shot.png")
    cmd = " ".join(["cd /work/main && .venv/bin/python benchmarks/nb201.py"] + sys.argv[1:])
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    mean = lambda v: statistics.mean(v) if v else float("nan")  # noqa: E731
    timing = (
        f"Median wall time per cell at zero-shot (all proxies): {med(list(per_cell.values())):.1f} s "
        f"(mean {mean(list(per_cell.values())):.1f} s, n={len(per_cell)}); per proxy (median): "
        + ", ".join(f"{p} {med(v):.2f} s" for p, v in by_proxy.items())
        + "".join(f". Warm-up {w:g} ({round(w * 4000)} images = {warmup_steps(w, 4000, 64)} SGD steps): median "
                  f"{med(ws):.1f} s (n={len(ws)}), then SiGeo {med(ss):.1f} s"
                  for w, (ws, ss) in sorted(warm_by_level.items()))
    )
    text = "\n".join([
        "## NB201 on CIFAR-10: proxy vs. NB201 test accuracy (SiGeo Tables 2-3)",
        "",
        f"Summary command: `{cmd}`. The scores came from workers started with the same script (each resumable: "
        "re-run to continue), in the background at once: zero-shot `--archs 300 --warmup 0 --time-limit 4800 --csv "
        "benchmarks/out/nb201_scores.csv`, the same from the other end of the sample `--reverse --time-limit 2250 --csv "
        "benchmarks/out/nb201_scores_rev.csv`, and warm-up `--archs 300 --warmup 0.1 --warmup-archs 100 --time-limit 4800 "
        "--csv benchmarks/out/nb201_warmup.csv`; then, one worker at a time, the 20% / 40% levels with the per-sample FR "
        "diagnostic at every level `--archs 300 --warmup 0,0.1,0.2,0.4 --warmup-archs 100 --proxies frnorm "
        "--warmup-proxies sigeo,frnorm --time-limit 4200 --state-dir benchmarks/out/nb201_states --csv "
        "benchmarks/out/nb201_warmup_more.csv,benchmarks/out/nb201_warmup.csv,benchmarks/out/nb201_scores.csv,"
        "benchmarks/out/nb201_scores_rev.csv` (the further CSVs: rows already scored there are not redone), and the "
        "same with `--warmup 1.25` (time-limited; the cells reached are listed with their table). "
        f"Machine: {platform.machine()}, 2 cores shared with ~6 other jobs (load average ~12), 1 torch thread per worker, "
        f"CPU only, torch {torch.__version__}.",
        "",
        "Setup: cells are a seeded sample (seed 0) of the 15,625; truth = NB201 CIFAR-10 test accuracy (200 epochs) from "
        "`../shared/data/nb201/nb201_acc.csv`. Proxies from `ctrnas.proxies` on 4 batches of 64 real CIFAR-10 training "
        "images (the shared 4000-image sample), NB201 normalisation, one seeded initialisation per cell, train mode. "
        "`sigeo` = library SiGeo, modules=zico (Conv/Linear weights, ZiCo convention), zero_shot preset λ=(1,1,0) at 0% "
        "and warmup_cv λ=(1,50,1) after warm-up; `sigeo.zico` = its term 1 = the library ZiCo with per-batch gradients; "
        "`sigeo.fr` = its log FR-norm term. `nwot` = NASWOT (first batch), `synflow` = SynFlow (float64, all-ones input), "
        "`params` = parameter count. Non-finite scores rank last. 95% percentile bootstrap intervals over cells "
        f"({args.n_boot} resamples, seed {args.seed}).",
        "",
        "### Zero-shot (paper: SiGeo Table 2, NB201-CF10)",
        "",
        format_markdown(summary, PAPER),
        "",
        "### Warm-up (paper: SiGeo Table 3), same cells at every level",
        "",
        "Warm-up = one SGD pass (NB201 recipe: lr 0.1 cosine, Nesterov 0.9, wd 5e-4, batch 64) over the given fraction "
        "of the 4000-image training sample (10% = 400 images = 7 steps, 20% = 800 = 13, 40% = 1600 = 25), per cell "
        "from its zero-shot initial weights. The paper warms up on a fraction of the full 50,000-image training set, "
        "i.e. 12.5x more images (and steps, at equal batch size) at every level. `frnorm.*` (diagnostic, "
        "`ctrnas/vision/fisher.py`): the FR term with the per-sample empirical Fisher of SiGeo §3.3, "
        "log mean_n (θᵀ∇ℓ_n)² over the same 256 images, and the signed mean dot product mean_n θᵀ∇ℓ_n; "
        "`sigeo_ps@λ` = SiGeo with that FR term in place of App. E's batch-mean one.",
        "",
        format_markdown(warm_summary, PAPER),
        "",
        rise_table(rows, table, warmups, paired, args),
        "",
        *extra_blocks,
        timing + ".",
        "",
        f"Scatter plot: `benchmarks/out/nb201_scatter_zero_shot.png`; per-cell scores: `{args.csv}`.",
        "",
        search_report(rows, table, args.seed),
    ])
    print(text)
    SECTION.parent.mkdir(parents=True, exist_ok=True)
    SECTION.write_text(text)
    print(f"[{time.perf_counter() - t0:.0f} s]", file=sys.stderr)
    return 0


SEARCH_JSON = OUT / "nb201_search.json"


def rise_table(rows, table, levels, cells, args, only=None) -> str:
    """Paired bootstrap differences of Spearman ρ on the same cells: each metric at each warm-up level
    against itself at 0%, and SiGeo against ZiCo (its term 1) at the same level."""
    from ctrnas.vision.correlate import metric_values
    from ctrnas.vision.space import NB201Cell
    from ctrnas.vision.stats import spearman_difference

    keys = sorted(cells)
    acc = [table.accuracy(NB201Cell.from_str(k)) for k in keys]

    def vals(metric, w):
        v = metric_values(rows, metric, w)
        return [v.get(k, float("nan")) for k in keys]

    lines = ["| comparison (Δ Spearman ρ, same cells) | warm-up | Δρ [95% CI] | share of resamples > 0 |",
             "|---|---|---|---|"]
    for m in ["sigeo", "sigeo@1,1,1", "sigeo.zico", "sigeo_ps@1,50,1"]:
        for w in levels:
            if w == 0 or (only is not None and w not in only):
                continue
            d, (lo, hi), share = spearman_difference(vals(m, w), vals(m, 0.0), acc, args.n_boot, args.seed)
            lines.append(f"| {m} at {w:g} − {m} at 0 | {w:g} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {share:.2f} |")
    for m in ["sigeo", "sigeo@1,1,1", "sigeo_ps@1,50,1"]:
        for w in levels:
            if only is not None and w not in only:
                continue
            d, (lo, hi), share = spearman_difference(vals(m, w), vals("sigeo.zico", w), acc, args.n_boot, args.seed)
            lines.append(f"| {m} − sigeo.zico (ZiCo) | {w:g} | {d:+.3f} [{lo:+.3f}, {hi:+.3f}] | {share:.2f} |")
    return "\n".join(lines)


def run_searches(args, table) -> int:
    """Evolution with SiGeo (zero-shot) as fitness, one run per seed; the cache is pre-filled from the CSVs."""
    from ctrnas.vision.cifar import read_npz, to_tensor
    from ctrnas.vision.search import ProxyFitness, cache_from_csv, run_search

    x, y = to_tensor(read_npz(TRAIN), "cifar10")
    fitness = ProxyFitness("sigeo", x, y, seed=args.seed, device=args.device)
    pop, gens, tour, children = (int(v) for v in args.search_budget.split(","))
    t0, outcomes = time.perf_counter(), []
    for s in (int(v) for v in args.search_seeds.split(",")):
        if args.time_limit is not None and time.perf_counter() - t0 > args.time_limit:
            break
        # Re-read the CSVs each time: the correlation runs keep adding scores of the same (cell, seed).
        cache = cache_from_csv(args.csv.split(","), "sigeo")
        ts = time.perf_counter()
        o = run_search(fitness, table, strategy="evolution", seed=s, population=pop, generations=gens,
                       tournament=tour, children=children, cache=cache, progress=True)
        outcomes.append({**o.__dict__, "wall_s": time.perf_counter() - ts, "budget": args.search_budget})
        print(outcomes[-1], flush=True)
        SEARCH_JSON.write_text(json.dumps(outcomes, indent=1))
    return 0


def search_report(rows, table, seed: int) -> str:
    """The evolution outcomes next to the best cell, random choice and proxy top-1 of equally many random cells."""
    import numpy as np

    from ctrnas.vision.correlate import metric_values
    from ctrnas.vision.space import NB201Cell

    if not SEARCH_JSON.exists():
        return "### Search\n\nNot run (`--search`)."
    outs = json.loads(SEARCH_JSON.read_text())
    all_acc = np.array([v["cifar10_test"] for v in table.rows.values()])
    sig = metric_values(rows, "sigeo", 0.0)
    keys = sorted(sig)
    budget = outs[0]["evaluations"]
    rng = np.random.default_rng(seed)
    top1 = []
    for _ in range(1000):  # random search with the proxy: its top-1 among `budget` random scored cells
        pick = rng.choice(len(keys), size=min(budget, len(keys)), replace=False)
        best = max(pick, key=lambda i: sig[keys[i]])
        top1.append(table.accuracy(NB201Cell.from_str(keys[best])))
    lines = [
        "### Search in NB201 (evolution, SiGeo zero-shot as fitness)",
        "",
        f"Command: `cd /work/main && .venv/bin/python benchmarks/nb201.py --search --search-seeds "
        f"{','.join(str(o['seed']) for o in outs)} --search-budget {outs[0]['budget']}` (population, generations, "
        f"tournament, children: {budget} evaluations per seed; scores shared with the correlation CSV by cell).",
        "",
        "| seed | chosen cell | its CIFAR-10 test acc | random cell (same seed) | scored / evaluated | wall s |",
        "|---|---|---|---|---|---|",
    ]
    for o in outs:
        chosen = o["chosen"].replace("|", "\\|")  # the NB201 string's bars would split the table cell
        lines.append(f"| {o['seed']} | {chosen} | {o['chosen_accuracy']:.2f} | {o['random_choice_accuracy']:.2f} "
                     f"| {o['scored']} / {o['evaluations']} | {o['wall_s']:.0f} |")
    mean = np.mean([o["chosen_accuracy"] for o in outs])
    lines += [
        "",
        f"Mean chosen accuracy {mean:.2f}% over {len(outs)} seeds; best cell in NB201 {outs[0]['best_accuracy']:.2f}%; "
        f"random choice (mean over all 15,625 cells) {all_acc.mean():.2f}%, median {np.median(all_acc):.2f}%; "
        f"random search with the same proxy and budget (top-1 by SiGeo of {budget} random cells drawn from the "
        f"{len(keys)} scored above, 1000 draws) {np.mean(top1):.2f}% ± {np.std(top1):.2f}.",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
