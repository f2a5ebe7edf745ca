"""Benchmark `ctrnas predict` against `ctrnas prepare` on the same raw Criteo-format lines, and the peak RSS of
training one model on tables sized by the buckets vs by the data.

  rates   prepare() of a generated Criteo-format file (the NASRec defaults), then predict() of the same
          file with a model exported from that dataset (dlrm-like in ctrnas-small, fresh weights): rows/s
          of each (goal: predict >= 0.5x prepare's rate: the same parse plus one forward pass)
  rss     in fresh child processes: prepare with `hash_table_size: buckets` and `data`, then one training
          of the dlrm-like model on each (`--train-fraction` of the train split, final-stage defaults
          otherwise); the child's peak RSS (VmHWM) and the embedding rows

  .venv/bin/python benchmarks/predict.py --rows 200000 --rss-rows 200000 --buckets 1000000
writes benchmarks/out/predict/predict.json. Generated files live in benchmarks/out/predict (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
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
    from ctrnas.pipeline.predict import predict_file
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
from ctrnas import api
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.space.baselines import baseline_arch
from ctrnas.train.config import TrainConfig
path, out, size, buckets, fraction = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
meta = prepare("criteo", [path], out + "/data", PrepareConfig(hash_buckets=buckets, hash_table_size=size,
               progress=False), overwrite=True)
open(out + "/arch.json", "w").write(json.dumps(baseline_arch("dlrm-like").to_json()))
m, _ = api.train_model(out + "/data", TrainConfig(), arch=out + "/arch.json", space="ctrnas-small",
                       out_dir=out + "/train", train_fraction=fraction)
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"table_rows": sum(f["cardinality"] for f in meta["schema"]["sparse"]), "peak_rss_mib":
                  round(hwm / 1024), "test_logloss": m["test"]["logloss"]}))
"""


def rss(path: Path, work: Path, buckets: int, fraction: float) -> dict:
    out = {}
    for size in ("buckets", "data"):
        (work / size).mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(work / size), size, str(buckets),
                               str(fraction)], capture_output=True, text=True, env=env)
        if done.returncode:
            raise SystemExit(f"{size}: {done.stderr[-2000:]}")
        out[size] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    from prep import generate_criteo

    from _results import save

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--rss-rows", type=int, default=0, help="rows of the peak-RSS comparison (0: skip it)")
    ap.add_argument("--buckets", type=int, default=1_000_000, help="hash buckets per field (recipe default 1M)")
    ap.add_argument("--train-fraction", type=float, default=0.05)
    ap.add_argument("--workdir", type=Path, default=ROOT / "benchmarks" / "out" / "predict")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    result = {"args": {k: str(v) for k, v in vars(args).items()}}
    path = args.workdir / f"criteo-{args.rows}.tsv"
    if not path.exists():
        generate_criteo(path, args.rows)
    result["rates"] = rates(path, args.workdir, args.buckets)
    print(json.dumps(result["rates"]))
    if args.rss_rows:
        rpath = args.workdir / f"criteo-{args.rss_rows}.tsv"
        if not rpath.exists():
            generate_criteo(rpath, args.rss_rows)
        result["rss"] = rss(rpath, args.workdir / "rss", args.buckets, args.train_fraction)
        print(json.dumps(result["rss"]))
    save(args.workdir, "predict", result)


if __name__ == "__main__":
    main()
