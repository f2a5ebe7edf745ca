"""Named archs next to the baselines on the demo's data, trained as the demo's final stage trains them.

    .venv/bin/python benchmarks/space_archs.py dcnv2-like baseline:dcnv2 benchmarks/archs/dcnv2-dlrm.json \
        --seeds 0 1 --workers 2

Each model: the demo recipe (`recipes/synthetic.yaml`: 300k synthetic Criteo rows, 240k for training) with
its final-stage settings (2 epochs, the better val epoch, LayerNorms by `final.layernorm`, the recipe's
embedding init), one training per seed (`final.train.seed`). A model is an arch (shipped name or JSON path),
`baseline:NAME`, or either with `#torchrec` / `#nasrec` to draw its dense weights that way (`reinit`).
A model may end in `+KEY=VALUE` recipe settings of its own (repeatable), e.g.
`baseline:dcnv2+final.train.embedding_dim=32`: the same training with that setting changed.
Results are cached one JSON per (model, seed) under --out; the table of test / val log loss goes to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _recipe(data: str | None, seed: int, extra: tuple[str, ...] = ()):
    from ctrnas.recipe import load_recipe

    sets = ["train.progress=false", f"final.train.seed={seed}"] + ([f"data.path={data}"] if data else []) + list(extra)
    r = load_recipe(ROOT / "recipes/synthetic.yaml", sets)
    return dataclasses.replace(r, final=dataclasses.replace(r.final, train=dataclasses.replace(
        r.final_train, progress=False, threads=1)))


def _model(recipe, data, spec: str, seed: int):
    from ctrnas.pipeline.fitness.scratch import final_template
    from ctrnas.space import get_space
    from ctrnas.space.baselines import load_arch
    from ctrnas.supernet.export import export, reinit
    from ctrnas.train.baselines import build_baseline
    from ctrnas.train.normalise import use_layernorm

    what, _, init = spec.partition("#")
    if what.startswith("baseline:"):
        model = build_baseline(what.split(":", 1)[1], data.schema, dim=recipe.final_train.embedding_dim, seed=seed)
        return reinit(model, seed, recipe.final.embedding_init, init) if init else model
    arch = get_space(recipe.space).validate(load_arch(what))  # an arch outside the demo's space is an error
    template = final_template(recipe, data)
    if isinstance(template, dict):
        template = template[use_layernorm("auto", arch, True)]
    return export(template, arch, init="fresh", seed=seed, embedding_init=recipe.final.embedding_init,
                  dense_init=init or "nasrec")


def train_one(job: tuple) -> dict:
    spec, seed, data_path, out = job
    import torch

    from ctrnas import api
    from ctrnas.pipeline.fitness.scratch import dense_params, train_as_final

    torch.set_num_threads(1)
    what, *extra = spec.split("+")
    recipe = _recipe(data_path, seed, tuple(extra))
    data = api.prepare_data(recipe)
    model = _model(recipe, data, what, seed)
    val, test, seconds, trainer = train_as_final(model, recipe, data, None)
    res = {"model": spec, "seed": seed, "val": val.get("logloss"), "test": test.get("logloss"),
           "auc": test.get("auc"), "seconds": round(seconds, 1), "dense_params": dense_params(model),
           "diverged": trainer.diverged}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1) + "\n")
    tmp.replace(out)
    return res


def _file(out: Path, spec: str, seed: int) -> Path:
    spec, *extra = spec.split("+")
    what, _, init = spec.partition("#")
    name = Path(what).stem if what.endswith(".json") else what.replace(":", "_")
    return out / f"{name}{'#' + init if init else ''}{''.join('+' + e for e in extra)}@{seed}.json"


def _label(spec: str) -> str:
    what, *extra = spec.split("+")
    return "+".join([Path(what).stem if what.endswith(".json") else what] + extra)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", default=None, help="the demo's data folder if not runs/data/synthetic-criteo-300k")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/out/space-archs"))
    ap.add_argument("--report-only", action="store_true", help="print the table of what is cached; train nothing")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(m, s, args.data, _file(out, m, s)) for m in args.models for s in args.seeds]
    todo = [] if args.report_only else [j for j in jobs if not j[3].exists()]
    from ctrnas import api

    for extra in {tuple(j[0].split("+")[1:]) for j in todo}:  # data made once, here, not raced by the workers
        api.prepare_data(_recipe(args.data, 0, extra))
    with ProcessPoolExecutor(max_workers=max(1, min(args.workers, len(todo) or 1))) as ex:
        for r in ex.map(train_one, todo):
            print(f"{r['model']} seed {r['seed']}: test {r['test']:.5f} val {r['val']:.5f} ({r['seconds']:.0f} s)",
                  flush=True)
    print("| model | dense params | " + " | ".join(f"test / val seed {s}" for s in args.seeds) + " | mean test |")
    print("|---|---|" + "---|" * (len(args.seeds) + 1))
    for m in args.models:
        rs = {j[1]: json.loads(j[3].read_text()) for j in jobs if j[0] == m and j[3].exists()}
        cells = [f"{rs[s]['test']:.5f} / {rs[s]['val']:.5f}" if s in rs else "-" for s in args.seeds]
        mean = statistics.mean(r["test"] for r in rs.values()) if rs else float("nan")
        params = next(iter(rs.values()))["dense_params"] if rs else "-"
        print(f"| {_label(m)} | {params} | " + " | ".join(cells) + f" | {mean:.5f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
