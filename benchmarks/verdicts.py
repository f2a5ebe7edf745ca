"""The demo's pipeline on the suite's profiles: the export against the best baseline, with the verdict line.

    python benchmarks/verdicts.py --rows 100000 --profiles avazu-pairwise,kdd2012-crosses
    python benchmarks/verdicts.py --rows 100000 --rows 1000000:avazu-pairwise   # several sizes, one table

Each profile runs `recipes/synthetic.yaml` end to end (`ctrnas.api.run`: search, final stage with the
baselines below, verdict over 2 training seeds) on the profile's synthetic data, its rungs at 10% and 30% of
the training rows as in the demo. Every run keeps its folder under --out (a stopped run resumes), and the
section is rebuilt from the runs' `metrics.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import notes_marker, publish  # noqa: E402
from suite import PROFILES  # noqa: E402

BASELINES = "[lr, fm, dlrm, deepfm, xdeepfm, dcnv2]"


def run_folder(out: Path, profile: str, rows: int) -> Path:
    return out / f"{profile}-{rows // 1000}k"


def runs(specs: list[str], profiles: str) -> list[tuple[int, str]]:
    """(rows, profile) of each `--rows ROWS[:PROFILES]` (PROFILES: comma-separated, else `--profiles`), in order."""
    out = []
    for spec in specs:
        rows, _, names = spec.partition(":")
        out += [(int(rows), p) for p in (names or profiles).split(",")]
    return out


def run_one(profile: str, rows: int, args) -> None:
    from ctrnas import api

    shape, structure = PROFILES[profile]
    out = Path(args.out)
    api.run(args.recipe, f"data.path={out / 'data' / f'{profile}-{rows // 1000}k'}",
            f"data.synthetic={{profile: {shape}, rows: {rows}, seed: 0, structure: '{structure}'}}",
            f"output={run_folder(out, profile, rows)}", f"final.baselines={BASELINES}",
            "search.evolution.generations=4",  # 12 + 4 x 4, as measured (the demo runs 12 + 2 x 4 for its time)
            "search.multifidelity.rungs=[{fitness: short, fraction: 0.1, keep: 0.34}, "
            "{fitness: short, fraction: 0.3}]", *args.set, progress=False)


def report(out: Path, pairs: list[tuple[int, str]], command: str) -> str:
    lines = ["## The pipeline's verdict on the suite's profiles", "",
             f"Command: `python benchmarks/verdicts.py {command}`", "",
             "`recipes/synthetic.yaml` end to end on each profile's synthetic data (the rows given, data seed 0, "
             f"split 8/1/1; search seed 0; evolution 12 + 4 x 4), baselines {BASELINES.strip('[]')}, every model trained by the "
             "early-stop protocol; the verdict trains the export and its rival at a second training seed "
             "(margin in pair sd: both models' seed sds together).", "",
             "| profile | rows | export | its test | best baseline (test) | best searched arch (test) | Bayes | verdict "
             "| FTE | CPU min |",
             "|---|---:|---|---:|---|---:|---:|---|---:|---:|"]
    for rows, profile in pairs:
        m_path = run_folder(out, profile, rows) / "metrics.json"
        if not m_path.exists():
            continue
        m = json.loads(m_path.read_text())
        best, origin = m["best"], m["origin"]
        bases = [b for b in m["baselines"] if b.get("test_logloss") is not None]
        top = min(bases, key=lambda b: b["val_logloss"]) if bases else None
        cands = [c for c in m["candidates"] if c.get("test_logloss") is not None]
        found = min(cands, key=lambda c: c["val_logloss"]) if cands else None
        v = origin.get("verdict") or {}
        verdict = (f"{v['words']} vs {v['rival']} ({v['margin']:+.5f}, {v['in_pair_sd']:+.1f} pair sd)"
                   if v.get("in_pair_sd") is not None else "not measured")
        lines.append(f"| {profile} | {rows:,} | {best['label']} | {best['test_logloss']:.5f} | "
                     + (f"{top['label']} ({top['test_logloss']:.5f})" if top else "-")
                     + (f" | {found['test_logloss']:.5f}" if found else " | -")
                     + f" | {m['bayes_test_logloss']:.4f} | {verdict} | {m['compute']['fte']['total']:.1f} | "
                     f"{m['cpu_seconds']['total'] / 60:.1f} |")
    lines += ["", "Origin lines:", ""]
    for rows, profile in pairs:
        m_path = run_folder(out, profile, rows) / "metrics.json"
        if m_path.exists():
            lines.append(f"- {profile}, {rows:,} rows: {json.loads(m_path.read_text())['origin']['line']}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="append", default=None,
                    help="ROWS[:PROFILES] (repeatable; PROFILES comma-separated, else --profiles); default 100000")
    ap.add_argument("--profiles", default="avazu-pairwise,kdd2012-crosses")
    ap.add_argument("--recipe", default="recipes/synthetic.yaml")
    ap.add_argument("--set", action="append", default=[], help="recipe override KEY=VALUE (repeatable)")
    ap.add_argument("--out", default=str(HERE / "out" / "verdicts"))
    ap.add_argument("--section", default=str(HERE / "sections" / "verdicts.md"))
    ap.add_argument("--render", action="store_true", help="rebuild the section from the runs' files only")
    args = ap.parse_args(argv)
    specs = args.rows or ["100000"]
    pairs = runs(specs, args.profiles)
    unknown = sorted({p for _, p in pairs if p not in PROFILES})
    if unknown:
        raise SystemExit(f"unknown profiles {unknown}; expected some of {', '.join(PROFILES)}")
    if not args.render:
        for rows, p in pairs:
            run_one(p, rows, args)
    command = ("".join(f"--rows {r} " for r in specs) + f"--profiles {args.profiles}"
               + "".join(f" --set {s}" for s in args.set))
    publish(report(Path(args.out), pairs, command), Path(args.section), notes_marker("verdicts.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
