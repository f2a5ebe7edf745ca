"""Neighbourhoods of the shipped archs: can a search that refines the seeds beat the baselines?

    .venv/bin/python benchmarks/neighbourhood.py --profiles kdd2012-dense-by-category --bases dlrm-like
    .venv/bin/python benchmarks/neighbourhood.py --workers 2 --train-seeds 0,1
    .venv/bin/python benchmarks/neighbourhood.py --report-only

For each structure-suite profile (benchmarks/suite.py) and each --bases arch (shipped archs), the arch and
every arch one local edit away (`SearchSpace.local_neighbours`: a width, depth or rank one step, FM or a
logit term flipped, in the space of the suite's search recipe with --set) are trained at --train-seeds as
the final stage trains them (2 epochs ending on the better val epoch). The report sets each against the arch
it came from and against the profile's best baseline (the suite's cached trainings, mean and sd over their
training seeds): what a search that refines the seeds can find at best, and whether finding it is the
search's problem or the space's. Trainings are cached in OUT/PROFILE/neighbourhood.json (one file per
profile, saved after each), so a stopped run resumes; --workers processes train, one torch thread each.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402
import suite  # noqa: E402

BASES = ("dlrm-like", "dcnv2-like", "deepfm-like", "deepfm-terms-like")
NOTES = _results.notes_marker("neighbourhood.py")


def _suite_args(args, extra=()):
    return argparse.Namespace(rows=args.rows, set=[*args.set, *extra], out=args.out, recipe=args.recipe,
                              workers=1, seeds=2, train_seeds=args.baseline_seeds)


def _setting_key(recipe, data) -> str:
    """What a training depends on besides (arch, seed): the final stage, the data, and the space (its
    LayerNorm and the like shape the network an arch key names)."""
    from ctrnas.config import to_dict

    return suite._key([suite._settings(recipe, data), to_dict(recipe.space)])


def edits(base: dict, arch: dict) -> str:
    """The arch's choices that differ from the base's, as 'block N field: old -> new'."""
    from ctrnas.data.dataset import differences

    def flat(a: dict) -> dict:
        out = {f"block {i}": b for i, b in enumerate(a.get("blocks", []), start=1)}
        out.update({k: v for k, v in a.items() if k not in ("blocks", "format")})
        return out

    return "; ".join(d.replace(".", " ", 1) if d.startswith("block") else d
                     for d in differences(flat(base), flat(arch))) or "(the arch itself)"


def jobs(args, profile: str) -> list[dict]:
    """The trainings of `profile` not yet cached: every base and neighbour at every training seed."""
    from ctrnas import api
    from ctrnas.space import Arch, get_space

    recipe = suite.recipe_for(_suite_args(args), profile)
    data = api.prepare_data(recipe)
    space, setting = get_space(recipe.space), _setting_key(recipe, data)
    cache = _results.load(Path(args.out) / profile, "neighbourhood") or {}
    out = []
    for base_name in args.bases:
        base = space.validate(Arch.from_json((ROOT / "ctrnas/space/archs" / f"{base_name}.json").read_text()))
        for arch in [base, *space.local_neighbours(base)]:
            for seed in args.train_seeds:
                key = f"{base_name}:{arch.key()}@{seed}:{setting}"
                if key not in cache:
                    out.append({"profile": profile, "key": key, "base": base_name, "base_arch": base.to_json(),
                                "arch": arch.to_json(), "seed": seed})
    return out


def train(job: dict, args) -> dict:
    """One final-stage training of the job's arch at its seed (in a worker: one torch thread)."""
    import torch

    torch.set_num_threads(1)
    from ctrnas import api
    from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_as_final
    from ctrnas.space import Arch

    recipe = suite.recipe_for(_suite_args(args, [f"final.train.seed={job['seed']}"]), job["profile"])
    data = api.prepare_data(recipe)
    t0 = time.perf_counter()
    model = job_model(recipe, data, final_template(recipe, data, None), ("arch", Arch.from_json(job["arch"])))
    val, test, _, _ = train_as_final(model, recipe, data)
    return {"profile": job["profile"], "key": job["key"], "base": job["base"], "arch_key": model_key(job),
            "edit": edits(job["base_arch"], job["arch"]), "seed": job["seed"], "val": val["logloss"],
            "test": test["logloss"], "seconds": time.perf_counter() - t0}


def model_key(job: dict) -> str:
    return job["key"].split(":")[1].split("@")[0]


def _train_star(pair):
    return train(*pair)


def run(args) -> None:
    todo = [j for p in args.profiles for j in jobs(args, p)]
    print(f"{len(todo)} trainings to run", flush=True)
    def keep(r: dict) -> None:
        # re-read first: another process may have added its own results since (as suite.Cache.put)
        folder = Path(args.out) / r["profile"]
        _results.save(folder, "neighbourhood", {**(_results.load(folder, "neighbourhood") or {}), r["key"]: r})
        print(f"{r['profile']} {r['base']} {r['arch_key'][:8]} seed {r['seed']}: val {r['val']:.5f} "
              f"test {r['test']:.5f} ({r['seconds']:.0f} s) {r['edit']}", flush=True)

    if args.workers <= 1:
        for j in todo:
            keep(train(j, args))
        return
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        for r in pool.imap_unordered(_train_star, [(j, args) for j in todo]):
            keep(r)


def _best_baseline(args, profile: str):
    """(name, mean, sd, n) of the suite's baseline with the lowest mean test log loss, or None."""
    res = suite.collect(_suite_args(args), profile)
    stats = [(b, statistics.mean(x), statistics.stdev(x) if len(x) > 1 else float("nan"), len(x))
             for b in suite.BASELINES if len(x := [r["test"] for r in res.get(b, [])]) > 0]
    return min(stats, key=lambda s: s[1]) if stats else None


def report(args) -> str:
    f = suite._f
    lines = ["## Neighbourhoods of the shipped archs: what refining the seeds can reach", "",
             f"Structure-suite profiles at {args.rows:,} rows. Each shipped arch and every arch one local edit "
             "away (`SearchSpace.local_neighbours` in the suite's search space, `recipes/synthetic-prefix.yaml`"
             f"{' with ' + ', '.join(f'`{s}`' for s in args.set) if args.set else ''}), trained as the final "
             "stage trains (2 epochs ending on the better val epoch) at the training seeds shown. Margin = the "
             "profile's best baseline (mean over its training seeds in the suite) minus the arch's mean test log "
             "loss, and in units of that baseline's training-seed sd; positive is better than the baseline.", ""]
    summary = []
    for profile in args.profiles:
        cache = _results.load(Path(args.out) / profile, "neighbourhood") or {}
        best = _best_baseline(args, profile)
        lines += [f"### {profile}", ""]
        if best:
            lines += [f"Best baseline: {best[0]} {f(best[1])} (sd {f(best[2])}, {best[3]} seeds).", ""]
        lines += ["| around | arch | edit | test per seed | mean | vs its base | margin over the best baseline |",
                  "|---|---|---|---|---|---|---|"]
        for base_name in args.bases:
            rows: dict[str, dict] = {}
            for r in cache.values():
                if r["base"] == base_name:
                    rows.setdefault(r["arch_key"], {"edit": r["edit"], "seeds": {}})["seeds"][r["seed"]] = r["test"]
            if not rows:
                continue
            means = {k: statistics.mean(v["seeds"].values()) for k, v in rows.items()}
            base_key = next((k for k, v in rows.items() if v["edit"] == "(the arch itself)"), None)
            wins = []
            for k in sorted(rows, key=means.get):
                v = rows[k]
                per_seed = " / ".join(f"{v['seeds'][s]:.4f}" for s in sorted(v["seeds"]))
                vs_base = "-" if base_key is None else f"{means[base_key] - means[k]:+.4f}"
                margin = "-"
                if best:
                    m = best[1] - means[k]
                    margin = f"{m:+.4f} ({m / best[2]:+.1f} sd)" if best[2] == best[2] and best[2] > 0 else f"{m:+.4f}"
                    if best[2] == best[2] and m > 2 * best[2] and len(v["seeds"]) > 1:
                        wins.append(k)
                lines.append(f"| {base_name} | `{k[:8]}` | {v['edit']} | {per_seed} | {f(means[k])} | {vs_base} "
                             f"| {margin} |")
            summary.append(f"- {profile}, around {base_name}: {len(rows) - 1} edits; "
                           f"{len(wins)} beyond 2 sd of the best baseline at 2+ seeds"
                           f"{' (' + ', '.join(f'`{w[:8]}`' for w in wins) + ')' if wins else ''}")
        lines.append("")
    seeds = ",".join(map(str, args.train_seeds))
    sets = "".join(f" --set '{s}'" for s in args.set)
    lines[4:4] = [f"Command: `.venv/bin/python benchmarks/neighbourhood.py --rows {args.rows} --profiles "
                  f"{','.join(args.profiles)} --bases {','.join(args.bases)} --train-seeds {seeds}"
                  f"{sets}` (add `--workers N` to train N at a time)", ""]  # above the tables
    lines += ["Summary:", "", *summary, ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--profiles", default="kdd2012-dense-by-category,kdd2012-deep,kdd2012-crosses")
    ap.add_argument("--bases", default="dlrm-like,deepfm-like", help=f"shipped archs ({', '.join(BASES)})")
    ap.add_argument("--train-seeds", default="0,1", help="training seeds of every arch")
    ap.add_argument("--baseline-seeds", type=int, default=4, help="the suite's baseline seeds to compare with")
    ap.add_argument("--workers", type=int, default=1, help="trainings at a time (one process each)")
    ap.add_argument("--recipe", default=suite.RECIPE, help="the search recipe whose space and final stage apply")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe overrides")
    ap.add_argument("--out", default=None,
                    help="the suite's results folder (default benchmarks/out/suite-<rows/1000>k)")
    ap.add_argument("--section", default=None, help="markdown section (default benchmarks/sections/neighbourhood.md)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    args.profiles = [p for p in args.profiles.split(",") if p]
    args.bases = [b for b in args.bases.split(",") if b]
    args.train_seeds = [int(s) for s in args.train_seeds.split(",") if s]
    for what, given, known in (("--profiles", args.profiles, suite.PROFILES), ("--bases", args.bases, BASES)):
        if bad := [x for x in given if x not in known]:
            ap.error(f"{what}: unknown {', '.join(bad)}; known: {', '.join(known)}")
    args.out = str(Path(args.out or ROOT / f"benchmarks/out/suite-{args.rows // 1000}k"))
    if not args.report_only:
        run(args)
    _results.publish(report(args), Path(args.section or ROOT / "benchmarks/sections/neighbourhood.md"), NOTES)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
