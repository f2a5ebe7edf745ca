"""Time the README's three "Use the found model" commands on a finished run (the demo's, `make demo`):

  export  `ctrnas export` of the run's best_arch.json from its warm-up supernet (inherited weights)
  predict `ctrnas predict` of the run's exported model on the test split of its prepared data folder
  load    a `python -I` script (torch alone on the path: no ctrnas, no pickle) that loads model.pt2 and scores
          4,096 encoded rows

  .venv/bin/python benchmarks/predict_demo.py --run runs/demo --data runs/data/synthetic-criteo-300k
Each command runs in its own process; wall and CPU (user + sys of the child) seconds. Nothing in RUN or DATA
is written: outputs go to benchmarks/out/predict-demo (git-ignored), written as demo.json there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

LOAD = """
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
m = torch.export.load(sys.argv[1]).module()
t2 = time.perf_counter()
g = torch.Generator().manual_seed(0)
dense, ids = torch.rand(4096, int(sys.argv[2]), generator=g), torch.zeros(4096, int(sys.argv[3]), dtype=torch.long)
with torch.no_grad():
    p = m(dense, ids)
t3 = time.perf_counter()
assert p.shape == (4096,) and not any(k.split(".")[0] == "ctrnas" for k in sys.modules)
print({"import_torch_s": round(t1 - t0, 2), "load_s": round(t2 - t1, 2), "score_4096_s": round(t3 - t2, 3)})
"""


def timed(cmd: list[str], env: dict) -> dict:
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)}: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # its last line that is not a torch log line ("W1126 16:08:29.05 ... is_fx_tracing ...")
    last = [line for line in (done.stdout + "\n" + done.stderr).splitlines()
            if line.strip() and not re.match(r"[WIE]\d{4} ", line)][-1]
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "said": last}


def main() -> None:
    from _results import save

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished run folder (best_arch.json, warmup/, model/)")
    ap.add_argument("--data", type=Path, required=True, help="its prepared data folder")
    ap.add_argument("--workdir", type=Path, default=ROOT / "benchmarks" / "out" / "predict-demo")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    ctrnas = [sys.executable, "-m", "ctrnas"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    card = json.loads((args.run / "model" / "model_card.json").read_text())
    schema = json.loads((args.data / "meta.json").read_text())["schema"]
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "load_before": os.getloadavg()[0],
              "arch": card["arch_key"]}
    result["export"] = timed(ctrnas + ["export", "--arch", str(args.run / "best_arch.json"), "--supernet",
                                       str(args.run / "warmup" / "supernet.pt"), "--out",
                                       str(args.workdir / "model")], env)
    result["predict"] = timed(ctrnas + ["predict", "--model", str(args.run / "model"), "--input", str(args.data),
                                        "--split", "test", "--out", str(args.workdir / "preds.parquet"),
                                        "--overwrite", "--no-progress"], env)
    script = args.workdir / "load.py"
    script.write_text(LOAD)
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result["load"] = timed([sys.executable, "-I", str(script), str(args.run / "model" / "model.pt2"),
                            str(len(schema["dense"])), str(len(schema["sparse"]))], bare)
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))
    save(args.workdir, "demo", result)


if __name__ == "__main__":
    main()
