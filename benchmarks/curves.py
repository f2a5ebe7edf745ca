"""Learning curves of a finished run's candidates: how well each share of the final training ranks them.

    .venv/bin/python benchmarks/curves.py RUN --out curves.json                 # every distinct candidate
    .venv/bin/python benchmarks/curves.py RUN --out retrain.json --retrain KEY,KEY --seeds 0,1,2,3

Each distinct arch of RUN/search/history.json is trained as RUN's final stage trains it (its recipe, its
training seed, its initial weights), and the validation log loss on the search's validation rows
(`oneshot.eval_rows`) is read at --shares of the training: one training, stopped and continued in place, so the
last point is the final training's own end. The report gives Kendall's tau of each share's loss against the
end, and of a two-point power-law extrapolation (L = a + b t^-c, ranked by a). `--retrain` instead trains the
named archs (key prefixes) at the training --seeds and scores validation and test as the final stage does.
Results are cached in --out after every arch, so a stopped run resumes. `--data` points at the run's data
when it has moved. The results page (docs/results.md) states what it found.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARES = (0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 0.8, 1.0)


def _setup(run: Path, data_path: str | None, extra=()):
    from ctrnas.pipeline.data import open_data
    from ctrnas.recipe import load_recipe

    sets = ([f"data.path={data_path}", "data.synthetic=null"] if data_path else []) + list(extra)
    recipe = load_recipe(run / "recipe.yaml", sets)
    return recipe, open_data(recipe.data_dir)


def distinct(run: Path) -> list[dict]:
    """The history's records, one per arch key, in the order the search first scored them."""
    seen, out = set(), []
    for r in json.loads((run / "search" / "history.json").read_text()):
        if r["key"] not in seen:
            seen.add(r["key"])
            out.append(r)
    return out


def curve(recipe, data, template, arch, shares, val) -> list[list[float]]:
    """[share, step, val log loss] of one final-stage training of `arch`, read at each share of its steps."""
    import dataclasses

    from ctrnas.pipeline.fitness.rungs import final_steps, guarded_trainer
    from ctrnas.pipeline.fitness.scratch import final_train_batches, job_model

    total = final_steps(recipe, data)
    trainer = guarded_trainer(job_model(recipe, data, template, ("arch", arch)),
                              dataclasses.replace(recipe.final_train, progress=False), data)
    train = final_train_batches(recipe, data)
    out = []
    for s in shares:
        trainer.fit(train, None, resume=False, max_steps=max(1, round(s * total)))
        out.append([s, trainer.step, trainer.evaluate(val).logloss])
    return out


def run_curves(args) -> dict:
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.space import Arch
    from ctrnas.train.batches import dataset_batches

    recipe, data = _setup(args.run, args.data)
    template = final_template(recipe, data, None)
    val = dataset_batches(data.path, "val", recipe.final_train.eval_batch_size, limit=recipe.oneshot.eval_rows)
    done = json.loads(args.out.read_text()) if args.out.exists() else {}
    for r in distinct(args.run)[: args.max_archs]:
        if r["key"] in done:
            continue
        t0 = time.perf_counter()
        c = curve(recipe, data, template, Arch.from_json(r["arch"]), args.shares, val)
        done[r["key"]] = {"generation": r["generation"], "parent": r["parent_key"], "params": r["params"],
                          "curve": c, "seconds": time.perf_counter() - t0}
        args.out.write_text(json.dumps(done, indent=1))
        print(r["key"][:10], [round(x[2], 4) for x in c], f"{time.perf_counter() - t0:.0f} s", flush=True)
    return done


def retrain(run: Path, arch: dict, seed: int, data_path: str | None = None) -> dict:
    """`arch` (its JSON) trained as `run`'s final stage trains, at training seed `seed`: val / test log loss."""
    from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_as_final
    from ctrnas.space import Arch

    recipe, data = _setup(run, data_path, [f"final.train.seed={seed}"])
    model = job_model(recipe, data, final_template(recipe, data, None), ("arch", Arch.from_json(arch)))
    v, t, seconds, _ = train_as_final(model, recipe, data)
    return {"val": v.get("logloss"), "test": t.get("logloss"), "seconds": seconds}


def run_retrain(args) -> dict:
    records = distinct(args.run)
    done = json.loads(args.out.read_text()) if args.out.exists() else {}
    for prefix in args.retrain:
        r = next((x for x in records if x["key"].startswith(prefix)), None)
        if r is None:
            raise SystemExit(f"--retrain: no arch of {args.run}/search/history.json starts with {prefix!r}")
        for seed in args.seeds:
            tag = f"{r['key']}@{seed}"
            if tag in done:
                continue
            done[tag] = retrain(args.run, r["arch"], seed, args.data)
            args.out.write_text(json.dumps(done, indent=1))
            print(tag, done[tag], flush=True)
    return done


def extrapolate(points: dict[float, float], s1: float, s2: float, c: float) -> float:
    """a of L(t) = a + b t^-c through the losses at shares s1 and s2."""
    b = (points[s1] - points[s2]) / (s1 ** -c - s2 ** -c)
    return points[s2] - b * s2 ** -c


def report(curves: dict) -> list[str]:
    """Kendall's tau of each share's loss, and of the extrapolations, against the loss at the end."""
    from ctrnas.search.predictor import kendall_tau

    points = [{s: v for s, _, v in r["curve"]} for r in curves.values()]
    if len(points) < 3:
        return [f"{len(points)} curves: too few for a rank correlation"]
    end = max(points[0])
    final = [p[end] for p in points]
    lines = [f"{len(points)} candidates; Kendall tau against the loss at share {end:g}:"]
    for s in sorted(points[0])[:-1]:
        lines.append(f"  loss at {s:g}: {kendall_tau([p[s] for p in points], final):+.2f}")
    shares = sorted(points[0])[:-1]
    for s1, s2 in zip(shares, shares[1:]):
        for c in (0.5, 1.0):
            tau = kendall_tau([extrapolate(p, s1, s2, c) for p in points], final)
            lines.append(f"  power law through {s1:g} and {s2:g} (c {c:g}): {tau:+.2f}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a finished run folder (recipe.yaml, search/history.json)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON cache of results")
    ap.add_argument("--data", default=None, help="the run's data folder, when it has moved")
    ap.add_argument("--shares", default=",".join(map(str, SHARES)), help="shares of the final training")
    ap.add_argument("--max-archs", type=int, default=None, help="only the first N distinct candidates")
    ap.add_argument("--retrain", default="", help="arch key prefixes to retrain at --seeds instead")
    ap.add_argument("--seeds", default="0,1", help="training seeds of --retrain")
    args = ap.parse_args(argv)
    args.shares = sorted(float(s) for s in args.shares.split(",") if s)
    if not args.shares or args.shares[-1] != 1.0 or args.shares[0] <= 0:
        ap.error("--shares: positive shares ending at 1 (the end of the training)")
    args.retrain = [k for k in args.retrain.split(",") if k]
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    if args.retrain:
        run_retrain(args)
    else:
        print("\n".join(report(run_curves(args))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
