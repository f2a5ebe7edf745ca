"""Benchmark `ctrnas predict` against `ctrnas prepare` on the same raw Criteo-format lines, and the peak RSS of
training one model on tables sized by the buckets vs by the data.

  rates   prepare() of a generated Criteo-format file (the NASRec defaults), then predict() of the same
          file with a model exported from that dataset (dlrm-like in ctrnas-small, fresh weights): rows/s
          of each (goal: predict >= 0.5x prepare's rate: the same parse plus one forward pass)
  rss     in fresh child processes: prepare with `hash_table_size: buckets` and `data`, then one final-stage
          training as a training worker runs it (the final template, then the dlrm-like model exported from
          it and trained on the first `--train-rows` training rows with the recipe defaults, evaluated on
          all val/test rows); the child's peak RSS (VmHWM), the final stage's own estimate of it
          (`ctrnas.pipeline.final.memory`) and the embedding rows

  .venv/bin/python benchmarks/predict.py --rows 200000 --rss-rows 1000000 --buckets 1000000
  .venv/bin/python benchmarks/predict.py --report-only      # rebuild the section from predict.json

Raw results go to benchmarks/out/predict/predict.json, the section to benchmarks/sections/predict.md (or
--section). Generated files live in benchmarks/out/predict (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def _export(data: Path, model: Path) -> None:
    from ctrnas import api
    from ctrnas.space.baselines import baseline_arch

    arch = data.parent / "arch.json"
    arch.write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
    api.export_arch(str(arch), model, data_dir=data, space="ctrnas-small", init="fresh", seed=0)


def rates(path: Path, work: Path, buckets: int) -> dict:
    from ctrnas.data.prepare import prepare
    from ctrnas.data.prepare_config import PrepareConfig
    from ctrnas.serving.predict import predict_file
    import ctrnas.train.metrics  # noqa: F401  (imports sklearn: not timed, as prepare's imports are not)

    data, model = work / "data", work / "model"
    t0 = time.perf_counter()
    meta = prepare("criteo", [str(path)], data, PrepareConfig(hash_buckets=buckets, progress=False), overwrite=True)
    t_prep = time.perf_counter() - t0
    _export(data, model)
    t0 = time.perf_counter()
    predict_file(model, [str(path)], work / "preds.parquet", overwrite=True, progress=False)
    t_pred = time.perf_counter() - t0
    rows = meta["rows"]["read"]
    return {"rows": rows, "prepare_s": round(t_prep, 2), "predict_s": round(t_pred, 2),
            "prepare_rows_s": round(rows / t_prep), "predict_rows_s": round(rows / t_pred),
            "ratio": round(t_prep / t_pred, 3), "table_rows": sum(f["cardinality"] for f in meta["schema"]["sparse"])}


CHILD = """
import json, sys
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.pipeline.data import open_data
from ctrnas.pipeline.final.memory import job_sizes, tensor_bytes, worker_bytes
from ctrnas.pipeline.fitness.scratch import final_template, job_model, train_as_final
from ctrnas.recipe import recipe_from_dict
from ctrnas.space.baselines import baseline_arch
path, out, size, buckets, train_rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
meta = prepare("criteo", [path], out + "/data", PrepareConfig(hash_buckets=buckets, hash_table_size=size,
               progress=False), overwrite=True)
# a final-stage training as a worker runs it: the final template (the supernet the top-k are exported from),
# then one model exported from it and trained with the recipe defaults (final.train = train), capped rows
recipe = recipe_from_dict({"name": "rss", "data": {"path": out + "/data"}, "space": "ctrnas-small",
                           "train": {"progress": False}, "final": {"train_rows": train_rows}})
data = open_data(out + "/data")
template = final_template(recipe, data, None)
what = ("arch", baseline_arch("dlrm-like"))
size_ = job_sizes(recipe, data, template, [what])[0]
held = tensor_bytes(*(template.values() if isinstance(template, dict) else [template]))
estimate = worker_bytes(size_.training_bytes(recipe.final_train), held)  # what the final stage assumes
model = job_model(recipe, data, template, what)
val, test, seconds, trainer = train_as_final(model, recipe, data)
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"table_rows": sum(f["cardinality"] for f in meta["schema"]["sparse"]), "peak_rss_mib":
                  round(hwm / 1024), "estimate_mib": round(estimate / 2**20), "steps": trainer.step,
                  "test_logloss": test["logloss"]}))
"""


def rss(path: Path, work: Path, buckets: int, train_rows: int) -> dict:
    out = {}
    for size in ("buckets", "data"):
        (work / size).mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(work / size), size, str(buckets),
                               str(train_rows)], capture_output=True, text=True, env=env)
        if done.returncode:
            raise SystemExit(f"{size}: {done.stderr[-2000:]}")
        out[size] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


SIZES = {"buckets": "one per field of the hash buckets (`buckets`)", "data": "sized by the data (`data`, the default)"}


def report(result: dict) -> str:
    """The section: the command, then the peak-RSS table (if measured) and the rates table."""
    a, r = result["args"], result["rates"]
    lines = ["## Scoring raw rows and the memory of one final-stage training (`benchmarks/predict.py`)", "",
             f"Command: `{result['command']}`", "",
             f"Machine: {result['machine']}; 1-minute load average {result['load'][0]:.1f} at the start, "
             f"{result['load'][1]:.1f} at the end.", ""]
    if result.get("rss"):
        lines += [f"**Peak RSS of one final-stage training at {int(a['rss_rows']):,} Criteo-format rows, "
                  f"{int(a['buckets']):,} hash buckets per field, by how the tables are sized.** Each row is a fresh "
                  "child process that prepares the file (8:1:1 split), then trains as a final-stage worker does: "
                  "the final template (the `ctrnas-small` supernet the top-k are exported from), then the "
                  "dlrm-like model exported from it with fresh weights, trained with the recipe defaults on the "
                  f"first {int(a['train_rows']):,} training rows (the tables and their Adagrad state, which set the "
                  "peak, exist from the first step) and evaluated on all val and test rows. Estimate: the final "
                  "stage's own estimate of one worker (`ctrnas.pipeline.final.memory`). The generated file has no "
                  "click signal: its log loss is about the constant predictor's.", "",
                  "| tables (`hash_table_size`) | embedding rows | peak RSS | estimate | test log loss |",
                  "|---|---|---|---|---|"]
        for size, x in result["rss"].items():
            lines.append(f"| {SIZES[size]} | {x['table_rows']:,} | {x['peak_rss_mib']:,} MiB | "
                         f"{x['estimate_mib']:,} MiB | {x['test_logloss']:.5f} |")
        lines.append("")
    lines += [f"**`predict` vs `prepare` on the same {r['rows']:,} raw Criteo-format lines** (a dlrm-like model of "
              "`ctrnas-small` with fresh weights exported from the prepared folder; predict is the same parse plus "
              "one forward pass):", "",
              "| prepare s | prepare rows/s | predict s | predict rows/s | predict / prepare |", "|---|---|---|---|---|",
              f"| {r['prepare_s']:.2f} | {r['prepare_rows_s']:,} | {r['predict_s']:.2f} | {r['predict_rows_s']:,} "
              f"| {r['ratio']:.2f}x |", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    from prep import generate_criteo

    from _results import _atomic_write, load, save

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rss-rows", type=int, default=0, help="rows of the peak-RSS comparison (0: skip it)")
    ap.add_argument("--buckets", type=int, default=1_000_000, help="hash buckets per field (recipe default 1M)")
    ap.add_argument("--train-rows", type=int, default=8192,
                    help="training rows of the peak-RSS trainings (the peak is reached in the first steps)")
    ap.add_argument("--workdir", type=Path, default=ROOT / "benchmarks" / "out" / "predict")
    ap.add_argument("--section", type=Path, default=HERE / "sections" / "predict.md")
    ap.add_argument("--report-only", action="store_true", help="rewrite the section from predict.json")
    args = ap.parse_args(argv)
    if args.report_only:
        result = load(args.workdir, "predict")
        if result is None:
            raise SystemExit(f"{args.workdir}/predict.json: no results to report; run without --report-only")
    else:
        args.workdir.mkdir(parents=True, exist_ok=True)
        argv = sys.argv[1:] if argv is None else argv
        result = {"args": {k: str(v) for k, v in vars(args).items()},
                  "command": " ".join(["python benchmarks/predict.py", *map(shlex.quote, argv)]),
                  "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, python "
                             f"{platform.python_version()}, torch {_torch_version()}",
                  "load": [os.getloadavg()[0]]}
        path = args.workdir / f"criteo-{args.rows}.tsv"
        if not path.exists():
            generate_criteo(path, args.rows)
        result["rates"] = rates(path, args.workdir, args.buckets)
        print(json.dumps(result["rates"]))
        if args.rss_rows:
            rpath = args.workdir / f"criteo-{args.rss_rows}.tsv"
            if not rpath.exists():
                generate_criteo(rpath, args.rss_rows)
            result["rss"] = rss(rpath, args.workdir / "rss", args.buckets, args.train_rows)
            print(json.dumps(result["rss"]))
        result["load"].append(os.getloadavg()[0])
        save(args.workdir, "predict", result)
    text = report(result)
    print(text)
    _atomic_write(args.section, text)


def _torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    main()
