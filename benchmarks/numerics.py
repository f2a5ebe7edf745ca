"""Numerical safety of from-scratch training, for benchmarks/RESULTS.md.

Part 1 (chains): a chain of `depth` blocks of one dense op (Dot-Product, Sigmoid-Gating, or FC as the
control), each reading the previous block, in a NASRec-Full space of `depth` blocks; block 1 adds the FM
term, the one way besides Dot into the dense path (Avazu's one dense feature is constant). Per chain and
LayerNorm setting: the RMS of each block's dense output at initialisation (fresh weights, as the final
stage draws them) on the first validation batch, and how the final-stage training of the chain ends.

Part 2 (subnets): `--archs` random NASRec-Full subnets, each trained as the Avazu recipe's final stage
trains (lr 0.16, batch 256, one epoch) with LayerNorm off (NASRec's stand-alone training) and on; "auto"
is read off those two (on where the product degree is >= AUTO_DEGREE), since every training is seeded on
its own. Counts of diverged models and the test log loss of the rest, per setting and per product degree.

    python benchmarks/numerics.py --rows 20000 --archs 50 --workers 2

The section goes to benchmarks/sections/numerics.md (and stdout); raw results to benchmarks/out/.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import _results  # noqa: E402  (benchmarks/ is the script folder, first on sys.path)

OPS = ("dot", "gating", "fc")


def recipe_for(args, layernorm):
    from ctrnas.recipe import load_recipe

    r = load_recipe(ROOT / "recipes/avazu.yaml", [
        f"data.path={args.data}", "data.raw=null",
        f"data.synthetic={{profile: avazu, rows: {args.rows}, seed: {args.seed}}}",
        f"final.layernorm={'true' if layernorm else 'false'}", "final.baselines=[lr]", "threads=1"])
    return dataclasses.replace(r, final=dataclasses.replace(
        r.final, train=dataclasses.replace(r.final_train, progress=False)))


def chain_arch(op: str, depth: int):
    from ctrnas.space import Arch
    from ctrnas.space.arch import BlockChoice

    blocks = [BlockChoice(dense_idx=(i - 1,), sparse_idx=(i - 1,), dense_left_idx=i - 1, dense_right_idx=i - 1,
                          dense_op=op, sparse_op="efc", dense_dim=256, sparse_tokens=16,
                          dense_sparse_merge=False, fm=i == 1) for i in range(1, depth + 1)]
    return Arch(tuple(blocks))


def block_rms(model, batch) -> list[float]:
    """RMS of each exported block's dense output on `batch`."""
    import torch

    out = []
    hooks = [b.register_forward_hook(lambda m, i, o: out.append(float(o[0].double().pow(2).mean().sqrt())))
             for b in model.net.blocks]
    with torch.no_grad():
        model(batch.dense_features, batch.sparse_features)
    for h in hooks:
        h.remove()
    return out


def outcome(val: dict, test: dict) -> dict:
    reason = val.get("reason") or ""
    return {"diverged": reason.startswith("diverged"), "reason": reason or None,
            "val_logloss": val.get("logloss"), "test_logloss": test.get("logloss")}


def part_chains(args, data) -> list[dict]:
    from ctrnas.pipeline.fitness.scratch import arch_model, final_template, train_from_scratch
    from ctrnas.space import SpaceConfig
    from ctrnas.train.batches import dataset_batches

    batch = next(iter(dataset_batches(data.path, "val", 256).batches(0)))
    rows = []
    for op in OPS:
        for depth in args.depths:
            for ln in (False, True):
                r = recipe_for(args, ln)
                r = dataclasses.replace(r, space=dataclasses.replace(r.space, num_blocks=depth))
                assert isinstance(r.space, SpaceConfig)
                arch = chain_arch(op, depth)
                model = arch_model(r, final_template(r, data), arch)
                rms = block_rms(model, batch)
                val, test, sec = train_from_scratch(model, r, data, f"{op}x{depth}")
                rows.append({"op": op, "depth": depth, "layernorm": ln, "init_rms": rms, "seconds": sec,
                             **outcome(val, test)})
                print(f"chain {op} x{depth} ln={ln}: init RMS {['%.3g' % x for x in rms]} -> "
                      f"{'diverged' if rows[-1]['diverged'] else rows[-1]['test_logloss']}", flush=True)
    return rows


def part_subnets(args, data) -> list[dict]:
    """Train each subnet with LayerNorm off, then on; every finished training is saved at once, so an
    interrupted run resumes where it stopped (same --rows/--seed/--archs)."""
    import json

    import numpy as np

    from ctrnas.pipeline.fitness.scratch import final_template

    from ctrnas.pipeline.final.workers import training_executor
    from ctrnas.space import get_space
    from ctrnas.train.normalise import product_degree

    space = get_space("nasrec-full")
    rng = np.random.default_rng(args.seed)
    archs, seen = [], set()
    while len(archs) < args.archs:
        a = space.sample(rng)
        if a.key() not in seen:
            seen.add(a.key())
            archs.append(a)
    done_path = ROOT / "benchmarks/out" / f"numerics_subnets_{args.rows}_{args.seed}.jsonl"
    done = {}
    if done_path.exists():
        for line in done_path.read_text().splitlines():
            d = json.loads(line)
            done[(d["key"], d["setting"])] = d["outcome"]
    for setting in [x for x in args.settings.split(",") if x in ("off", "on")]:  # "none": only collect
        todo = [a for a in archs if (a.key(), setting) not in done]
        r = recipe_for(args, setting == "on")
        t0 = time.perf_counter()
        if todo:
            jobs = [(("arch", a), False, f"subnet {a.key()}") for a in todo]
            with training_executor(r, data, final_template(r, data), args.workers, len(jobs)) as ex:
                for i, res in ex.imap(jobs, ordered=False):  # saved as each finishes, so a stop resumes
                    out = outcome(res["val"], res["test"])
                    done[(todo[i].key(), setting)] = out
                    with open(done_path, "a") as fh:
                        fh.write(json.dumps({"key": todo[i].key(), "setting": setting, "outcome": out}) + "\n")
        n = sum(done[(a.key(), setting)]["diverged"] for a in archs)
        print(f"subnets layernorm {setting}: {n} of {len(archs)} diverged ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    rows = [{"key": a.key(), "degree": product_degree(a)} for a in archs]
    for row in rows:
        for setting in ("off", "on"):
            row[setting] = done.get((row["key"], setting))
    return rows


def _stats(outs: list[dict]) -> str:
    ok = [o["test_logloss"] for o in outs if not o["diverged"] and o["test_logloss"] is not None
          and math.isfinite(o["test_logloss"])]
    if not ok:
        return "- | - | -"
    return f"{min(ok):.4f} | {statistics.median(ok):.4f} | {max(ok):.4f}"


def _command(a: dict, part: str) -> str:
    extra = f" --archs {a['archs']} --workers {a['workers']}" if part == "subnets" else \
        f" --depths {' '.join(str(d) for d in a['depths'])}"
    return (f"`python benchmarks/numerics.py --parts {part} --rows {a['rows']} --seed {a['seed']}{extra}` "
            f"(synthetic Avazu profile, {a['rows']} rows split 8:1:1)")


def section(chains: dict | None, subs: dict | None) -> str:
    from ctrnas.train.normalise import AUTO_DEGREE

    lines = ["## Numerical safety: products without LayerNorm (`benchmarks/numerics.py`)", "",
             "Every model trained as the Avazu recipe's final stage trains (lr 0.16, batch 256, one epoch, clip "
             "5, fresh weights, TorchRec-style tables). 'diverged' = stopped by the trainer's divergence test "
             "(NaN/inf loss, or mean loss over 20 steps > 100 x ln 2).", ""]
    if chains:
        lines += ["### (1) Chains of one op: dense-output RMS per block at initialisation, and the training", "",
                  f"Command: {_command(chains['args'], 'chains')}.", "",
                  "| op | depth | LayerNorm | RMS of block 1 .. depth at init | training ends |", "|---|---|---|---|---|"]
        for c in chains["rows"]:
            end = f"diverged ({c['reason'].split(': ', 1)[-1][:60]}...)" if c["diverged"] \
                else f"test log loss {c['test_logloss']:.4f}"
            lines.append(f"| {c['op']} | {c['depth']} | {'on' if c['layernorm'] else 'off'} | "
                         f"{', '.join('%.3g' % x for x in c['init_rms'])} | {end} |")
        lines.append("")
    if subs:
        lr_test, subs_args, const = subs["lr_test"], subs["args"], subs["constant_test"]
        subs = [s for s in subs["rows"] if s["off"] and s["on"]]  # trained both ways (a run may be cut short)
        thresholds = sorted({2, 4, AUTO_DEGREE})
        for s in subs:
            for t in thresholds:
                s[f"auto{t}"] = s["on"] if s["degree"] >= t else s["off"]
        lines += [f"### (2) {len(subs)} random NASRec-Full subnets: how many diverge, per LayerNorm setting", "",
                  f"Command: {_command(subs_args, 'subnets')}. On the same rows LR's test log loss is "
                  f"{lr_test:.4f}, the constant predictor's (training CTR) {const:.4f}.",
                  "",
                  "| LayerNorm in the final models | diverged | trained, but within 0.001 of the constant predictor or "
                  "worse | test log loss of the rest: best | median | worst |",
                  "|---|---|---|---|---|---|"]
        for name in ("off", *(f"auto{t}" for t in thresholds), "on"):
            outs = [s[name] for s in subs]
            t = int(name[4:]) if name.startswith("auto") else None
            label = ("off (NASRec; before)" if name == "off" else "on" if name == "on" else
                     f"on from product degree {t}" + (" (`auto`; after)" if t == AUTO_DEGREE else ""))
            flat = sum(not o["diverged"] and o["test_logloss"] is not None and o["test_logloss"] > const - 1e-3
                       for o in outs)
            lines.append(f"| {label} | {sum(o['diverged'] for o in outs)} of {len(outs)} | {flat} | "
                         f"{_stats(outs)} |")
        lines += ["", "By product degree of the logit (`ctrnas.train.normalise.product_degree`), LayerNorm off "
                  "vs on:", "", "| degree | subnets | diverged off | diverged on | median test off | median test on |",
                  "|---|---|---|---|---|---|"]
        for deg in sorted({s["degree"] for s in subs}):
            group = [s for s in subs if s["degree"] == deg]
            med = {}
            for name in ("off", "on"):
                ok = [s[name]["test_logloss"] for s in group if not s[name]["diverged"]
                      and s[name]["test_logloss"] is not None]
                med[name] = f"{statistics.median(ok):.4f}" if ok else "-"
            lines.append(f"| {deg} | {len(group)} | {sum(s['off']['diverged'] for s in group)} | "
                         f"{sum(s['on']['diverged'] for s in group)} | {med['off']} | {med['on']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20000, help="synthetic Avazu rows (all splits)")
    ap.add_argument("--archs", type=int, default=50, help="random NASRec-Full subnets in part 2")
    ap.add_argument("--workers", type=int, default=1, help="training processes in part 2")
    ap.add_argument("--seed", type=int, default=1, help="data and subnet sampling seed")
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3, 4, 6])
    ap.add_argument("--parts", default="chains,subnets")
    ap.add_argument("--settings", default="off,on", help="LayerNorm settings to train in part 2 (none: render what is saved)")
    ap.add_argument("--data", default="/tmp/ctrnas-numerics-data")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/sections/numerics.md")
    args = ap.parse_args(argv)
    from ctrnas.pipeline.data import prepare_data
    from ctrnas.pipeline.fitness.scratch import job_model, train_from_scratch

    base = recipe_for(args, False)
    data = prepare_data(base)
    parts, out = args.parts.split(","), ROOT / "benchmarks/out"
    # each part's raw results are kept, so a section can be re-rendered after running one part again
    if "chains" in parts:
        _results.save(out, "numerics_chains", {"args": vars(args) | {"out": str(args.out)},
                                               "rows": part_chains(args, data)})
    if "subnets" in parts:
        rows = part_subnets(args, data)
        _, test, _ = train_from_scratch(job_model(base, data, None, ("baseline", "lr")), base, data, "lr")
        sp = data.meta["splits"]
        c, v = sp["train"]["ctr"], sp["test"]["ctr"]  # always predicting the training CTR, on test
        _results.save(out, "numerics_subnets", {"args": vars(args) | {"out": str(args.out)}, "rows": rows,
                                                "lr_test": test.get("logloss"),
                                                "constant_test": -(v * math.log(c) + (1 - v) * math.log(1 - c))})
    chains, subs = _results.load(out, "numerics_chains"), _results.load(out, "numerics_subnets")
    _results.publish(section(chains, subs), args.out, _results.notes_marker("numerics.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
