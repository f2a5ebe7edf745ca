"""The verdict: the export against the best other model, over training seeds.

One training seed cannot tell a margin from seed noise: two near-identical archs of one run differ on test by
more than most margins a search finds. So the final stage trains the export and its rival again at training
seeds seed+1 .. seed+n-1 (`final.verdict_seeds`; seed+0 is the stage's own training). The rival is the best
baseline by validation when the export is a searched arch (is the search better than a hand design?), else
the best other model the stage trained.

margin = mean test log loss of the export - the rival's, over the n seeds; pair sd = sqrt(sd_a^2 + sd_b^2), the
two models' sample sds over their seeds together (the unit `benchmarks/suite.py` reports margins in). The
words: "better" below -BEYOND pair sd, "worse" above +BEYOND, else "level within noise".
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ctrnas.pipeline.origin import judge_seeds

VERDICT_DIR = "verdict"


def rival_of(best, candidates, baselines):
    """The model the export is judged against (see the module docstring), or None."""
    from ctrnas.pipeline.final.selection import rank_key

    pool = [m for m in (baselines if best.arch is not None else [*candidates, *baselines]) if m is not best]
    pool = [m for m in pool if math.isfinite(rank_key(m))]
    return min(pool, key=rank_key) if pool else None


def seeded(recipe, offset: int):
    """`recipe` with the final stage's training seed moved by `offset`."""
    cfg = recipe.final_train
    return dataclasses.replace(recipe, final=dataclasses.replace(
        recipe.final, train=dataclasses.replace(cfg, seed=cfg.seed + offset)))


def job_of(model) -> tuple:
    """The final-stage job that trains `model` again: ("arch", Arch) or ("baseline", its job name)."""
    if model.arch is not None:
        return ("arch", model.arch)
    name, at, width = model.label.partition(" at width ")
    return ("baseline", f"{name}@{width}" if at else name)


def run_verdict(recipe, data, template, out_dir: Path | None, best, candidates, baselines, workers: int = 1,
                progress: bool = True) -> dict | None:
    """Train the export and its rival at the extra seeds; the verdict record (None: `final.verdict_seeds` 1)."""
    from tqdm.auto import tqdm

    from ctrnas.pipeline.final.resume import jobs_for
    from ctrnas.pipeline.final.workers import in_workers, train_job, training_executor, with_workers

    n = recipe.final.verdict_seeds
    if n < 2:
        return None
    rival = rival_of(best, candidates, baselines)
    if rival is None or best.status != "ok":
        return {"seeds": 1, "words": "not measured", "margin": math.nan, "why": "no usable rival",
                "rival": rival.label if rival else None}
    tests = {"export": [best.test.get("logloss", math.nan)], "rival": [rival.test.get("logloss", math.nan)]}
    steps = 0
    bar = tqdm(total=2 * (n - 1), desc="verdict (export + rival at more seeds)", unit="model", disable=not progress)
    try:
        for offset in range(1, n):
            r = seeded(recipe, offset)
            whats = [job_of(best), job_of(rival)]
            folder = Path(out_dir) / VERDICT_DIR / f"seed+{offset}" if out_dir is not None else None
            jobs = jobs_for(r, data, folder, [(f"verdict {w[0]}", w) for w in whats])
            specs = [(w, False, f"{m.label} at seed +{offset}", j) for w, m, j in zip(whats, (best, rival), jobs)]
            k = min(workers, 2)
            if k > 1 and in_workers(with_workers(r, k), k):
                with training_executor(with_workers(r, k), data, template, k, jobs=2) as ex:
                    outs = list(ex.map(specs))
            else:
                outs = [train_job((r, data, template), s) for s in specs]
            for j in jobs:  # its numbers are kept in result.json; its weights are never exported
                if j is not None:
                    j.drop_checkpoint()
            for key, out in zip(("export", "rival"), outs):
                tests[key].append(out["test"].get("logloss", math.nan) if not out.get("diverged") else math.nan)
                steps += int(out["val"].get("steps") or 0)
                bar.update(1)
    finally:
        bar.close()
    v = judge_seeds(tests["export"], tests["rival"])
    return {**v, "export": best.label, "rival": rival.label, "tests": tests,
            "samples": steps * recipe.final_train.batch_size}


def verdict_for(recipe, data, template, out_dir: Path | None, progress: bool = True):
    """The `verdict` callable `ctrnas.pipeline.final.selection.finish` takes (None: no verdict)."""
    if recipe.final.verdict_seeds < 2:
        return None

    def judge(best, candidates, baselines):
        return run_verdict(recipe, data, template, out_dir, best, candidates, baselines,
                           workers=recipe.final.workers, progress=progress)
    return judge
