"""CPU seconds a command costs before it does anything: `ctrnas train --help`, `ctrnas predict` with a bad
argument, a `ctrnas predict` of 300 rows with a trained model folder (with its model.pt2, and the same folder
without it), and a `ctrnas train` on a 100-row dataset (80 training rows: start-up, export and the writes are
nearly all of it), for this checkout and, with --before REF, for the commit REF side by side.

    .venv/bin/python benchmarks/startup.py --before REF [--repeats 3]

Each command runs in its own process (PYTHONPATH = the checkout, one torch thread); CPU = user + sys of the
child (resource.getrusage), the least of --repeats runs (the train: of --train-repeats), the two checkouts
alternating. REF is checked out into a temporary git worktree, removed at the end. The dataset is prepared
once (`ctrnas prepare criteo`, this checkout) from 100 Criteo-format lines written by tests/helpers/samples.py,
and the model folder predict reads is trained from it once (`ctrnas train --arch dcnv2-like`, this checkout);
predict scores those 100 lines three times over. Also lists which of torch / torchrec / scikit-learn each
command loaded. Writes benchmarks/sections/startup.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from _results import notes_marker, publish  # noqa: E402

MARKER = notes_marker("startup.py")
HEAVY = ("torch", "torchrec", "sklearn")
# runs a command as `python -m ctrnas` does, then names the heavy modules it loaded (on stderr, last line)
PROBE = ("import sys, runpy\nsys.argv = ['ctrnas'] + sys.argv[1:]\ncode = 0\ntry:\n"
         "    runpy.run_module('ctrnas', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
         f"print('loaded:', ','.join(m for m in {HEAVY!r} if m in sys.modules) or '-', file=sys.stderr)\n"
         "sys.exit(code)\n")


def commands(data: Path, out: Path, model: Path, rows: Path) -> list[tuple[str, list[str], int | None]]:
    """(label, argv, the exit status it must give; None: 0); "{out}": a new path for each run."""
    return [
        ("ctrnas train --help", ["train", "--help"], None),
        ("ctrnas predict --model m (missing --input, --out)", ["predict", "--model", "m"], 2),
        ("ctrnas predict of a model folder that is not there", ["predict", "--model", str(out / "none"), "--input",
                                                                 str(out / "none.tsv"), "--out", str(out / "p.pq")], 1),
        ("ctrnas predict of 300 rows, trained dcnv2-like model folder",
         ["predict", "--model", str(model), "--input", str(rows), "--out", "{out}", "--no-progress"], None),
        ("the same, the folder without model.pt2",
         ["predict", "--model", str(model.with_name("no-pt2")), "--input", str(rows), "--out", "{out}",
          "--no-progress"], None),
        ("ctrnas train --arch dcnv2-like on 100 rows (with its export)",
         ["train", "--data", str(data), "--arch", "dcnv2-like", "--out", "{out}", "--no-progress"], None),
    ]


def run_once(tree: Path, argv: list[str], want: int | None, cwd: Path) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, heavy modules loaded) of one child process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != (want or 0):
        raise SystemExit(f"{tree}: ctrnas {' '.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    loaded = [line for line in done.stderr.splitlines() if line.startswith("loaded: ")][-1][len("loaded: "):]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, loaded


def measure(trees: dict[str, Path], data: Path, work: Path, repeats: int, train_repeats: int) -> list[dict]:
    rows = []
    for i, (label, argv, want) in enumerate(commands(data, work, work / "model", work / "rows300.tsv")):
        is_train = argv[0] == "train" and "{out}" in argv
        best: dict[str, tuple[float, float, str]] = {}
        for r in range(train_repeats if is_train else repeats):
            for name, tree in trees.items():
                args = [str(work / f"out{i}-{name}-{r}") if a == "{out}" else a for a in argv]
                got = run_once(tree, args, want, work)
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
        rows.append({"label": label, **{name: best[name] for name in trees}})
    return rows


def report(rows: list[dict], names: list[str], cmd: str, repeats: int, train_repeats: int) -> str:
    load = os.getloadavg()[0]
    lines = ["## Start-up (benchmarks/startup.py)", "", f"Command: `{cmd}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}, "
             f"load average {load:.1f} at the end of the run. CPU = user + sys seconds of the command's process, the "
             f"least of {repeats} runs ({train_repeats} for the training); wall seconds beside it (inflated by the "
             "box's load). `loaded`: which of torch, torchrec and scikit-learn the command imported.", ""]
    head = "| command | " + " | ".join(f"{n} CPU s | {n} wall s | {n} loaded" for n in names)
    if len(names) == 2:
        head += f" | CPU {names[1]} / {names[0]}"
    lines += [head + " |", "|---" * (1 + 3 * len(names) + (len(names) == 2)) + "|"]
    for row in rows:
        cells = [row["label"]]
        for n in names:
            cpu, wall, loaded = row[n]
            cells += [f"{cpu:.2f}", f"{wall:.1f}", loaded]
        if len(names) == 2:
            cells.append(f"{row[names[1]][0] / row[names[0]][0]:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", metavar="REF", help="also measure this git commit (a temporary worktree)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each quick command (the least CPU is kept)")
    ap.add_argument("--train-repeats", type=int, default=1, help="runs of the 100-row training")
    ap.add_argument("--out", default=str(HERE / "sections" / "startup.md"))
    args = ap.parse_args(argv)
    from tests.helpers.samples import criteo_lines

    with tempfile.TemporaryDirectory(prefix="ctrnas-startup-") as tmp:
        work = Path(tmp)
        trees = {}
        if args.before:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(work / "before"),
                            args.before], check=True)
            trees["before"] = work / "before"
        trees["this checkout" if not args.before else "after"] = ROOT
        try:
            raw = work / "criteo100.tsv"
            raw.write_text("\n".join(criteo_lines()) + "\n")
            (work / "rows300.tsv").write_text("\n".join(criteo_lines() * 3) + "\n")
            data = work / "data"
            env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
            subprocess.run([sys.executable, "-m", "ctrnas", "prepare", "criteo", "--input", str(raw), "--out",
                            str(data), "--hash-buckets", "100", "--no-progress"], check=True, env=env,
                           capture_output=True)
            subprocess.run([sys.executable, "-m", "ctrnas", "train", "--data", str(data), "--arch", "dcnv2-like",
                            "--out", str(work / "model"), "--no-progress"], check=True, env=env, capture_output=True)
            shutil.copytree(work / "model", work / "no-pt2", ignore=shutil.ignore_patterns("model.pt2"))
            rows = measure(trees, data, work, args.repeats, args.train_repeats)
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "before")],
                               check=False)
    cmd = " ".join([".venv/bin/python", "benchmarks/startup.py", *map(shlex.quote, sys.argv[1:] if argv is None
                                                                       else argv)])
    publish(report(rows, list(trees), cmd, args.repeats, args.train_repeats), Path(args.out), MARKER)


if __name__ == "__main__":
    main()
