"""Space benchmark: can the ctrnas spaces express and beat the hand-designed models?

    .venv/bin/python benchmarks/space.py --rows 1000000 --archs 50 --workers 15      # the full run
    .venv/bin/python benchmarks/space.py --rows 1000000 --archs 25 --workers 2 --parts random \
        --spaces torchrec-init --variant 'torchrec-init:final.dense_init=torchrec'   # a variant of 25
    .venv/bin/python benchmarks/space.py --rows 60000 --archs 6 --workers 2           # a small run
    .venv/bin/python benchmarks/space.py --report-only --rows 1000000                 # rebuild the section

On the synthetic Criteo profile, every model trained as the final stage trains (the demo recipe's
`final:`: 2 epochs ending on the better val epoch, LayerNorms off, all training rows unless --train-rows):
  baselines  the DLRM-like and DCN-v2-like archs (`ctrnas/space/archs/`, exported from the full
             `ctrnas-small` preset) next to the DLRM and DCN-v2 baselines, and DCN-v2's stacked form
             (`dcnv2-stacked`), each with --seeds training seeds;
  random     --archs random subnets of `ctrnas-small` and of `nasrec-small`, both cut as the demo recipe cuts
             its space (3 blocks, widths <= 256): best, median and worst test log loss. The NASRec-Small
             subnets are the ranking study's (same recipe seed, same sampler): pass its trained.json with
             --reuse-nasrec to skip retraining them. `--variant LABEL:KEY=VALUE;...` adds a space of the same
             cut with other recipe overrides (e.g. a narrower sampling prior), trained the same way;
             `--spaces` picks which spaces this run trains (the report shows every space trained so far).
Trained models are cached under --out (a stopped run resumes). The section goes to
benchmarks/sections/space.md (or --section).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)

SPACES = ("ctrnas-small", "nasrec-small")


def base_recipe(args, space: str = "nasrec-small", extra: tuple[str, ...] = ()):
    from ctrnas.recipe import load_recipe

    return load_recipe(ROOT / "recipes/synthetic-nasrec.yaml", [
        f"name=space-{args.rows // 1000}k", f"output={args.out}/{{name}}",
        f"data.path={args.out}/data-{args.rows // 1000}k",
        f"data.synthetic.rows={args.rows}", "train.progress=false", f"threads={args.threads}",
        f"final.train_rows={'null' if args.train_rows is None else args.train_rows}", f"space.base={space}",
        *args.set, *extra])


def variants(args) -> dict[str, tuple[str, tuple[str, ...]]]:
    """label -> (preset, extra overrides): the two presets, then each `--variant LABEL:KEY=VALUE;...`."""
    out = {s: (s, ()) for s in SPACES}
    saved = _results.load(args.out, "variants") or {}  # those of earlier runs, so a report names their overrides
    out.update({label: (base, tuple(sets)) for label, (base, sets) in saved.items()})
    for v in args.variant:
        label, _, sets = v.partition(":")
        overrides = tuple(x for x in sets.split(";") if x)
        base = next((x.split("=", 1)[1] for x in overrides if x.startswith("space.base=")), "ctrnas-small")
        out[label] = (base, overrides)
    return out


def _seeded(recipe, seed: int):
    return dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(recipe.final_train, seed=seed, progress=False)))


def part_baselines(args) -> dict:
    """The shipped archs and the baselines they stand for, each trained with every seed."""
    from ctrnas import api
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.pipeline.final.workers import training_executor
    from ctrnas.space import PRESETS
    from ctrnas.space.baselines import baseline_arch

    recipe = dataclasses.replace(base_recipe(args), space=PRESETS["ctrnas-small"])  # the archs' own 7-block space
    data = api.prepare_data(recipe)
    template = final_template(recipe, data)
    cached = _results.load(args.out, "baselines") or {}
    jobs = [("arch", "dlrm-like"), ("baseline", "dlrm"), ("arch", "dcnv2-like"), ("baseline", "dcnv2"),
            ("arch", "dcnv2-stacked")]
    for seed in range(args.seeds):
        todo = [j for j in jobs if f"{j[1]}@{seed}" not in cached]
        if not todo:
            continue
        r_s = _seeded(recipe, seed)
        jobs_s = [((k, baseline_arch(w) if k == "arch" else w), False, f"{w} seed {seed}") for k, w in todo]
        with training_executor(r_s, data, template, args.workers, len(jobs_s)) as ex:
            for (_, what), (_, r) in zip(todo, ex.imap(jobs_s)):
                cached[f"{what}@{seed}"] = {"val": r["val"], "test": r["test"], "seconds": r["seconds"],
                                            "dense_params": r["dense_params"]}
                _results.save(args.out, "baselines", cached)
    return cached


def part_random(args) -> dict:
    """`--archs` random subnets of each (cut) space in `--spaces`, trained from scratch with the study's code.

    Each space's trainings are cached as they finish (trained-<label>.json); random.json holds every space
    trained so far, so a run of one space keeps the others' results."""
    from ctrnas import api
    from ctrnas.pipeline.stages import new_supernet
    from ctrnas.pipeline.study import train_all, sample_archs

    out = _results.load(args.out, "random") or {}
    spaces = variants(args)
    _results.save(args.out, "variants", {k: v for k, v in spaces.items() if k not in SPACES})
    for label in args.spaces.split(","):
        if label not in spaces:
            raise SystemExit(f"--spaces: unknown space {label!r}; known: {', '.join(spaces)} (add one with --variant)")
        space, extra = spaces[label]
        recipe = base_recipe(args, space, extra)
        data = api.prepare_data(recipe)
        cache = Path(args.out) / f"trained-{label}.json"
        if label == "nasrec-small" and args.reuse_nasrec and not cache.exists():
            shutil.copy(args.reuse_nasrec, cache)  # the ranking study's trainings of the same subnets
        archs = sample_archs(recipe, args.archs)
        trained = train_all(recipe, data, archs, new_supernet(recipe, data), cache, progress=True,
                             workers=args.workers)
        out[label] = [{"arch_key": a.key(), "arch": a.to_json(), **trained[a.key()]} for a in archs]
        _results.save(args.out, "random", out)
    return out


def by_feature(rows: list[dict]) -> list[tuple[str, int, float, int, float]]:
    """(feature, n with, median with, n without, median without) over random subnets: which choices of the
    sampling prior go with better or worse subnets."""
    tests = {
        "an FM term in some block": lambda b: any(x.get("fm") for x in b),
        "a Dot-Product block": lambda b: any(x["dense_op"] == "dot" for x in b),
        "Dot-Product first": lambda b: b[0]["dense_op"] == "dot",
        "a Cross block": lambda b: any(x["dense_op"] == "cross" for x in b),
        "an interaction block": lambda b: any(x["dense_op"] == "interaction" for x in b),
        "a dense-sparse merge": lambda b: any(x.get("dense_sparse_merge") for x in b),
    }
    out = []
    for name, has in tests.items():
        yes = [_loss(r) for r in rows if has(r["arch"]["blocks"]) and math.isfinite(_loss(r))]
        no = [_loss(r) for r in rows if not has(r["arch"]["blocks"]) and math.isfinite(_loss(r))]
        med = lambda xs: statistics.median(xs) if xs else math.nan  # noqa: E731
        out.append((name, len(yes), med(yes), len(no), med(no)))
    return out


def paired(rnd: dict, spaces: dict) -> dict[str, list[tuple[float, float]]]:
    """label -> (ctrnas-small loss, its loss) for every variant that changes how ctrnas-small's own subnets
    train, not which are drawn (no `space.` override; the draws then are the same)."""
    base = {r["arch_key"]: _loss(r) for r in rnd.get("ctrnas-small", [])}
    same_draws = {k for k, (preset, sets) in spaces.items() if k not in SPACES and preset == "ctrnas-small"
                  and not any(x.startswith("space.") for x in sets)}
    out = {}
    for label, rows in rnd.items():
        pairs = [(base[r["arch_key"]], _loss(r)) for r in rows if label in same_draws and r["arch_key"] in base
                 and math.isfinite(base[r["arch_key"]]) and math.isfinite(_loss(r))]
        if pairs:
            out[label] = pairs
    return out


def _loss(r) -> float:
    return r["test"].get("logloss", math.nan)


def _f(x, d=4) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{d}f}"


def report(args) -> str:
    base, rnd = _results.load(args.out, "baselines") or {}, _results.load(args.out, "random") or {}
    rows = args.train_rows
    lines = ["## Space: DLRM and DCN-v2 as points of the space, random subnets of ctrnas-small", "",
             f"Synthetic Criteo profile, {args.rows:,} rows, {'all' if rows is None else format(rows, ',')} training "
             f"rows per model; final-stage training (2 epochs, best val epoch, LayerNorms off); "
             f"{platform.machine()}, {os.cpu_count()} CPU cores, {args.workers} worker process(es), torch threads "
             f"{args.threads}. {args.machine}", ""]
    if args.rows < 1_000_000:
        lines += [f"**Reduced run: {args.rows:,} rows instead of the full 1M ({args.archs} subnets per space), "
                  "what 2 CPU cores allow; the seed noise and the gaps differ at 1M.**", ""]
    noise = {}
    if base:
        lines += ["| model | params (dense) | " + " | ".join(f"test log loss seed {s}" for s in range(args.seeds))
                  + " | mean |", "|---|---|" + "---|" * (args.seeds + 1)]
        for what in ("dlrm", "dlrm-like", "dcnv2", "dcnv2-like", "dcnv2-stacked"):
            rs = [base.get(f"{what}@{s}") for s in range(args.seeds)]
            losses = [_loss(r) for r in rs if r]
            params = next((r["dense_params"] for r in rs if r), None)
            noise[what] = (statistics.mean(losses) if losses else math.nan,
                           statistics.stdev(losses) if len(losses) > 1 else math.nan)
            lines.append(f"| {what} | {params if params is not None else '-'} | "
                         + " | ".join(_f(_loss(r)) if r else "-" for r in rs) + f" | {_f(noise[what][0])} |")
        lines.append("")
    summary, spaces = {}, variants(args)
    if rnd:
        lines += ["| space (3 blocks, widths <= 256) | overrides | subnets | best | median | worst |",
                  "|---|---|---|---|---|---|"]
        for label in [*spaces, *(k for k in rnd if k not in spaces)]:
            losses = sorted(x for x in (_loss(r) for r in rnd.get(label, [])) if math.isfinite(x))
            if losses:
                summary[label] = (losses[0], statistics.median(losses), losses[-1])
                sets = "; ".join(f"`{x}`" for x in spaces.get(label, ("", ()))[1]) or "-"
                lines.append(f"| {label} | {sets} | {len(losses)} | "
                             + " | ".join(_f(v) for v in summary[label]) + " |")
        lines.append("")
    if rnd.get("ctrnas-small"):
        lines += ["Median test log loss of the random `ctrnas-small` subnets with and without each choice (what a "
                  "sampling prior could favour):", "", "| subnets with | n | median | n without | median without |",
                  "|---|---|---|---|---|"]
        lines += [f"| {name} | {ny} | {_f(my)} | {nn} | {_f(mn)} |" for name, ny, my, nn, mn
                  in by_feature(rnd["ctrnas-small"])]
        lines.append("")
    for label, pairs in paired(rnd, spaces).items():
        d = [b - a for a, b in pairs]
        sd = statistics.stdev(d) if len(d) > 1 else math.nan
        lines += [f"Paired: the {len(d)} subnets `{label}` shares with `ctrnas-small` (the same archs, trained "
                  f"otherwise): median {_f(statistics.median(b for _, b in pairs))} vs "
                  f"{_f(statistics.median(a for a, _ in pairs))}, mean difference {statistics.mean(d):+.4f} "
                  f"(sd {sd:.4f}), lower for {sum(x < 0 for x in d)} of {len(d)}.", ""]
    if "dcnv2" in noise and "dlrm" in noise:
        sd = max((s for _, s in noise.values() if math.isfinite(s)), default=math.nan)
        for label in (k for k in summary if k != "nasrec-small"):
            best, med = summary[label][0], summary[label][1]
            gap = noise["dcnv2"][0] - best
            lines += [f"Goal 1 (best random {label} subnet below DCN-v2 by more than the seed noise): "
                      f"{_f(best)} vs DCN-v2 {_f(noise['dcnv2'][0])}, difference {gap:+.4f}, seed noise (largest "
                      f"std over {args.seeds} seeds) {_f(sd)}: {'met' if gap > sd else 'not met'}.",
                      f"Goal 2 (median {label} subnet below DLRM): {_f(med)} vs DLRM {_f(noise['dlrm'][0])}: "
                      f"{'met' if med < noise['dlrm'][0] else 'not met'}.", ""]
    extra = "".join(f" --variant '{v}'" for v in args.variant) + "".join(f" --set {x}" for x in args.set)
    lines += [f"Command: `.venv/bin/python benchmarks/space.py --rows {args.rows} --archs {args.archs} --workers "
              f"{args.workers} --seeds {args.seeds}" + (f" --train-rows {rows}" if rows else "") + extra + "` "
              "(with `--spaces L1,L2` to train only some spaces in one run).", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="baselines,random")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--train-rows", type=int, default=None, help="training rows per model (default: all)")
    ap.add_argument("--archs", type=int, default=50, help="random subnets per space")
    ap.add_argument("--seeds", type=int, default=2, help="training seeds of the archs and baselines")
    ap.add_argument("--workers", type=int, default=1, help="models trained in N processes at once")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--spaces", default=",".join(SPACES), help="spaces (presets or --variant labels) to train")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE;...",
                    help="one more space: the cut with these recipe overrides (space.base defaults to ctrnas-small)")
    ap.add_argument("--reuse-nasrec", default=None, help="the ranking study's trained.json (same rows and seed)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--machine", default="", help="a sentence on the load during the runs, for the report")
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/out/space-<rows/1000>k)")
    ap.add_argument("--section", default=None, help="markdown section (default benchmarks/sections/space.md)")
    args = ap.parse_args()
    args.out = Path(args.out or ROOT / f"benchmarks/out/space-{args.rows // 1000}k")
    t0 = time.perf_counter()
    if not args.report_only:
        parts = args.parts.split(",")
        if "baselines" in parts:
            part_baselines(args)
        if "random" in parts:
            part_random(args)
    text = report(args)
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s)")
    section = Path(args.section or ROOT / "benchmarks/sections/space.md")
    section.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
