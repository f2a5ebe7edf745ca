"""Proxy ranking against each protocol's truth: `ctrnas study ranking` on the same random subnets, with every
subnet trained by NASRec's fixed protocol (2 epochs, cosine, the better epoch kept), by the early-stop protocol
without the weights' moving average (`plateau`) and by the default (`final.protocol: early-stop`), and the
proxies' Kendall tau against each.

    python benchmarks/ranking.py --data runs/data/avazu-pairwise-70k --archs 30

Each study keeps its trainings under --out/<data>-<protocol>/study (`trained.json`), so an interrupted run
resumes, and the section is rebuilt from the studies' `correlations.json` and `trained.json`.
The section's studies keep those files (and `scores.csv`) under benchmarks/results/ranking/: `--render --out
benchmarks/results/ranking` rebuilds the section from them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import notes_marker, publish  # noqa: E402

PROTOCOLS = {"nasrec": ["final.protocol=nasrec", "final.train={epochs: 2, restore_best: true}"],
             "plateau": ["final.protocol=early-stop", "final.train.ema=0"],
             "early-stop": ["final.protocol=early-stop"]}
# random subnets of NASRec-Small cut to 3 blocks of widths up to 64: cheap enough to train 30 twice on 2 cores
SPACE = ["space.base=nasrec-small", "space.num_blocks=3", "space.dense_dims=[16,32,64]", "space.sparse_tokens=[16]"]


def study_folder(out: Path, data: str, protocol: str) -> Path:
    return out / f"{Path(data).name}-{protocol}"


def study_recipe(recipe: str, data: str, protocol: str, out: Path, sets: list[str]):
    """The recipe of the study on `data` whose subnets train by `protocol`."""
    from ctrnas.recipe import load_recipe

    return load_recipe(recipe, [f"data.path={data}", "data.synthetic=null",
                                f"output={study_folder(out, data, protocol)}", "final.workers=1", *SPACE,
                                *PROTOCOLS[protocol], *sets])


def run_study(data: str, protocol: str, args) -> None:
    from ctrnas.pipeline.study import ranking_study

    recipe = study_recipe(args.recipe, data, protocol, Path(args.out), args.set)
    ranking_study(recipe, n_archs=args.archs, fractions=[float(f) for f in args.fractions.split(",")],
                  proxies=args.proxies.split(","), progress=False, echo=None, workers=args.workers)


def _kendall(a: list[float], b: list[float]) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def report(out: Path, datas: list[str], command: str) -> str:
    lines = ["## Proxy ranking under each training protocol", "",
             f"Command: `python benchmarks/ranking.py {command}`", "",
             "Kendall tau of each proxy's score against the negated test log loss of the same random subnets "
             "(NASRec-Small cut to 3 blocks of widths 16 to 64), each trained from scratch by the protocol named: `nasrec` (2 "
             "epochs, cosine, the better epoch kept), `plateau` (until val stops improving, the trained weights "
             "evaluated and kept) or `early-stop` (the default: `plateau` on a moving average of the weights). "
             "In brackets the 95% bootstrap interval. A proxy that ranks well has a positive tau.", ""]
    for data in datas:
        got = {}
        for p in PROTOCOLS:
            folder = study_folder(out, data, p) / "study"
            if (folder / "correlations.json").exists():
                got[p] = ({"rows": json.loads((folder / "correlations.json").read_text())},
                          json.loads((folder / "trained.json").read_text()))
        if not got:
            continue
        lines += [f"**{Path(data).name}**", ""]
        shown = list(got)
        lines += ["| proxy | warm-up | " + " | ".join(f"tau vs {p} truth" for p in shown) + " |",
                  "|---|---|" + "---|" * len(shown)]
        keys = sorted({(r["proxy"], r["fraction"]) for p in shown for r in got[p][0]["rows"]},
                      key=lambda k: (k[1], k[0]))
        for proxy, frac in keys:
            cells = []
            for p in shown:
                r = next((r for r in got[p][0]["rows"] if (r["proxy"], r["fraction"]) == (proxy, frac)), None)
                cells.append("-" if r is None else
                             f"{r['kendall']:+.2f} [{r['kendall_low']:+.2f}, {r['kendall_high']:+.2f}]")
            lines.append(f"| {proxy} | {frac:g} | " + " | ".join(cells) + " |")
        lines.append("")
        for p in shown:
            trained = got[p][1]
            tests = [v["test"]["logloss"] for v in trained.values()]
            steps = [v["val"]["steps"] for v in trained.values() if "steps" in v["val"]]
            lines.append(f"- `{p}`: {len(tests)} subnets, test log loss {min(tests):.5f} to {max(tests):.5f}"
                         + (f", {statistics.mean(steps):.0f} training steps on average" if steps else ""))
        for i, p in enumerate(shown):
            for q in shown[i + 1:]:
                a, b = got[p][1], got[q][1]
                common = sorted(set(a) & set(b))
                tau = _kendall([a[k]["test"]["logloss"] for k in common], [b[k]["test"]["logloss"] for k in common])
                lower = sum(b[k]["test"]["logloss"] < a[k]["test"]["logloss"] for k in common)
                lines.append(f"- `{p}` and `{q}` rank the {len(common)} subnets alike at Kendall tau {tau:+.2f}; "
                             f"`{q}` ends lower for {lower} of them")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", required=True, help="prepared dataset folder (repeatable)")
    ap.add_argument("--recipe", default="recipes/synthetic.yaml")
    ap.add_argument("--archs", type=int, default=30)
    ap.add_argument("--fractions", default="0,0.01")
    ap.add_argument("--proxies", default="sigeo,zico,naswot,params")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], help="recipe override KEY=VALUE (repeatable)")
    ap.add_argument("--out", default=str(HERE / "out" / "ranking"))
    ap.add_argument("--section", default=str(HERE / "sections" / "ranking.md"))
    ap.add_argument("--render", action="store_true", help="rebuild the section from the studies' files only")
    args = ap.parse_args(argv)
    if not args.render:
        for data in args.data:
            for p in args.protocols.split(","):
                run_study(data, p, args)
    command = " ".join(f"--data {d}" for d in args.data) + f" --archs {args.archs} --fractions {args.fractions} " \
        f"--proxies {args.proxies}" + "".join(f" --set {s}" for s in args.set)
    publish(report(Path(args.out), args.data, command), Path(args.section), notes_marker("ranking.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
