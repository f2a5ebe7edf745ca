"""Planted profiles: data whose best model is an arch of the search space that no hand design is, and how far the
hand designs stay from it.

    .venv/bin/python benchmarks/planted.py --rows 300000 --train-seeds 2
    .venv/bin/python benchmarks/planted.py --rows 300000 --report-only      # rebuild the section

Each planted profile of `benchmarks/suite.py` (`kdd2012-planted`, `kdd2012-planted-deep`: the logit is an arch of
the search space with random weights, datasets/README.md "Planted structures") gets the baselines and the planted
arch itself trained from scratch (the oracle), each as the demo's final stage trains (`recipes/synthetic-prefix.yaml`,
its default protocol: until val stops improving) at training seeds 0..--train-seeds-1, through the suite's own methods
(`baselines`, `planted`) and cached in its trainings files, so `suite.py` and this script share every training.
The gap is the best baseline's mean test log loss minus the planted arch's, in units of the pair's sd (the two
models' training-seed sds together, as the suite's goals count). The section goes to benchmarks/sections/planted.md.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402
import suite  # noqa: E402

NOTES = _results.notes_marker("planted.py")
PLANTED = tuple(p for p, (_, structure) in suite.PROFILES.items() if structure.startswith("planted"))
BASELINES = ("lr", "dlrm", "dcnv2", "deepfm", "xdeepfm")
GOAL = 5.0  # pair sd: the room a planted profile must hold beyond the best baseline


def _f(x, d=4) -> str:
    return suite._f(x, d)


def _ops(b, parts) -> str:
    """A live block as "dense op/sparse op" (- for a part the output does not use), "+fm" with its FM term."""
    dense = b.dense_op + ("+fm" if b.fm else "") if parts.dense else "-"
    return f"{dense}/{b.sparse_op if parts.sparse else '-'}"


def _plant(args, profile: str) -> dict:
    from ctrnas.data.dataset import read_meta

    try:
        return read_meta(Path(args.out) / "data" / profile)["click_model"].get("planted") or {}
    except Exception:  # not generated yet
        return {}


def gap(res: dict, names) -> dict | None:
    """The best baseline by mean test log loss (at least 2 training seeds) against the planted arch: means, sds,
    the gap (baseline - planted) and the gap in units of the pair's sd."""
    base = {k: [r["test"] for r in res[k]] for k in names if len(res.get(k, [])) >= 2}
    plant = [r["test"] for r in res.get("planted", [])]
    if not base or len(plant) < 2:
        return None
    best = min(base, key=lambda k: statistics.fmean(base[k]))
    mb, mp = statistics.fmean(base[best]), statistics.fmean(plant)
    pair = math.hypot(statistics.stdev(base[best]), statistics.stdev(plant))
    return {"best": best, "base": mb, "plant": mp, "gap": mb - mp, "pair": pair,
            "in_pair": (mb - mp) / pair if pair > 0 else math.inf}


def report(args) -> str:
    from ctrnas.train.config import EMA, MAX_EPOCHS, PATIENCE

    lines = ["## Planted profiles: the best model is in the space, in no hand design", "",
             f"Synthetic profiles whose logit is an arch of the search space with random weights (datasets/README.md, "
             f"\"Planted structures\"), {args.rows:,} rows (data seed 0, split 8/1/1); every model trained like the "
             f"demo's final stage (`{suite.RECIPE}`, final.protocol early-stop: until val stops improving, at most "
             f"{MAX_EPOCHS} epochs, stopped after {PATIENCE} evaluations without a lower val log loss, each scoring "
             f"the weights' moving average over {EMA:g} evaluation interval(s), ending on the best; Adagrad lr "
             f"0.12, batch 512, embedding dim 16), the planted arch as the final stage trains an arch "
             f"(LayerNorm by degree: on). {platform.machine()}, {os.cpu_count()} CPU cores, torch threads 1. "
             f"{args.machine}", ""]
    if args.rows < 1_000_000:
        lines += [f"**Reduced run: {args.rows:,} rows instead of 1M, what the shared 2 CPU cores allowed.**", ""]
    extra = f" --baselines {','.join(args.baselines)}" if tuple(args.baselines) != BASELINES else ""
    lines += [f"Command: `nice .venv/bin/python benchmarks/planted.py --rows {args.rows} --train-seeds "
              f"{args.train_seeds} --profiles {','.join(args.profiles)}{extra}`", ""]
    lines += ["The plants (`meta.json`'s `click_model.planted`; edits: `ctrnas.space.edit_distance` from each shipped "
              "arch to the plant):", "",
              "| profile (structure) | arch key | live blocks: ops | longest path | edits from dlrm-like / dcnv2-like "
              "/ deepfm-terms-like (fewest over all shipped) | dense parameters |", "|---|---|---|---|---|---|"]
    for profile in args.profiles:
        p = _plant(args, profile)
        if not p:
            continue
        from ctrnas.space import Arch

        arch = Arch.from_json(p["arch"])
        ops = ", ".join(f"{i} {_ops(arch.blocks[i - 1], q)}" for i, q in arch.live_parts().items())
        e = p["edits_from_shipped"]
        lines.append(f"| {profile} ({suite.PROFILES[profile][1]}) | {p['arch_key']} | {ops} | {p['longest_path']} | "
                     f"{e['dlrm-like']} / {e['dcnv2-like']} / {e['deepfm-terms-like']} ({min(e.values())}) | "
                     f"{p['dense_parameters']:,} |")
    seeds = " / ".join(str(s) for s in range(args.train_seeds))
    lines += ["", f"Test log loss per training seed ({seeds}):", "",
              "| profile | Bayes | constant | " + " | ".join(args.baselines) + " | planted arch |",
              "|---|---|---|" + "---|" * (len(args.baselines) + 1)]
    gaps = []
    for profile in args.profiles:
        res = suite.collect(args, profile)
        truth = suite._truth(args, profile)
        if not res:
            continue
        cells = [" / ".join(_f(r["test"]) for r in res.get(k, [])) or "-" for k in (*args.baselines, "planted")]
        lines.append(f"| {profile} | {_f(truth['bayes'])} | {_f(truth['constant'])} | " + " | ".join(cells) + " |")
        gaps.append((profile, gap(res, [b for b in args.baselines if b != "lr"]), truth))
    lines += ["", "The gap: the best baseline (LR aside) by mean test log loss against the planted arch trained from "
              "scratch; pair sd = the two models' training-seed sds together (sqrt of the sum of their variances):", "",
              "| profile | best baseline (mean) | planted arch (mean) | gap | pair sd | gap in pair sd | planted arch "
              "above Bayes |", "|---|---|---|---|---|---|---|"]
    met = 0
    for profile, g, truth in gaps:
        if g is None:
            lines.append(f"| {profile} | - | - | - | - | - | - |")
            continue
        met += g["in_pair"] > GOAL
        above = "-" if truth["bayes"] is None else _f(g["plant"] - truth["bayes"])
        lines.append(f"| {profile} | {g['best']} {_f(g['base'])} | {_f(g['plant'])} | {g['gap']:+.4f} | "
                     f"{_f(g['pair'])} | {g['in_pair']:+.1f} | {above} |")
    lines += ["", f"Goal (the planted arch below the best baseline by more than {GOAL:.0f} pair sd on each planted "
              f"profile): {met} of {len(gaps)} -> {'met' if gaps and met == len(gaps) else 'not met'}.", ""]
    return "\n".join(lines)


def make_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--profiles", default=",".join(PLANTED))
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--train-seeds", type=int, default=2)
    ap.add_argument("--out", default=None,
                    help="results folder (default: the suite's, benchmarks/out/suite-<rows/1000>k)")
    ap.add_argument("--section", default=None, help="markdown section (default benchmarks/sections/planted.md)")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.profiles = [p for p in args.profiles.split(",") if p]
    args.baselines = [b for b in args.baselines.split(",") if b]
    bad = [p for p in args.profiles if p not in PLANTED] + [b for b in args.baselines if not suite.known_baseline(b)]
    if bad:
        ap.error(f"unknown {', '.join(bad)}; planted profiles: {', '.join(PLANTED)}; baselines: "
                 f"{', '.join(suite.BASELINES)}")
    args.out = Path(args.out or ROOT / f"benchmarks/out/suite-{args.rows // 1000}k")
    # what the suite's methods read of their arguments
    args.recipe, args.set, args.workers, args.seed_trains = suite.RECIPE, [], 1, False
    args.seeds = args.train_seeds
    return args


def main(argv=None) -> int:
    args = make_args(argv)
    if not args.report_only:
        for profile in args.profiles:
            cache = suite.Cache(args, profile)
            suite.run_planted(args, profile, cache)
            suite.run_baselines(args, profile, cache)
    _results.publish(report(args), Path(args.section or ROOT / "benchmarks/sections/planted.md"), NOTES,
                     fallback=None if args.section else Path(args.out) / "planted-section.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
