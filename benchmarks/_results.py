"""Benchmark bookkeeping: raw-result JSON files under benchmarks/out/ (so a report can be rebuilt without
re-measuring), and RESULTS.md assembled from intro.md and the sections the scripts write.

    python benchmarks/_results.py            # rewrite benchmarks/RESULTS.md from the sections
    python benchmarks/_results.py --check    # exit 1 if RESULTS.md is not the assembly (tests run this)
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# pipeline order: data preparation, loading, training, the supernet, proxies (and their ranking under each
# protocol), the search against the baselines (the structure suite, the pipeline's verdicts, planted
# profiles), the embedding search, numerical safety, using the found model and the commands' start-up,
# vision, scale-out
SECTIONS = ("prep", "loader", "train", "step-profile", "peers", "protocol", "schedules", "supernet", "proxies",
            "ranking", "subnet-schedules", "suite", "verdicts", "planted",
            "embedding", "numerics", "predict", "startup", "nb201", "scale")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _strict(v):
    """NaN becomes null and ±inf the strings "inf"/"-inf": strict JSON."""
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {str(k): _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    return v


def save(out: Path, name: str, obj) -> None:
    _atomic_write(Path(out) / f"{name}.json", json.dumps(_strict(obj), indent=1, default=float, allow_nan=False))


def load(out: Path, name: str):
    """The cached results `name` under `out`, None if there are none; a damaged file stops the benchmark with
    one line (ctrnas.safeload.read_json: not UTF-8, not JSON, not a regular file, too large)."""
    from ctrnas.errors import CtrnasError
    from ctrnas.safeload import read_json

    p = Path(out) / f"{name}.json"
    if not p.exists() and not p.is_symlink():
        return None
    try:
        return read_json(p, "benchmark cache")
    except CtrnasError as e:
        raise SystemExit(f"{e}; delete it to run its trainings again, or restore it") from None


def assemble(folder: Path = HERE) -> str:
    """intro.md, then every section in pipeline order, one blank line apart."""
    sections = folder / "sections"
    unknown = sorted(p.stem for p in sections.glob("*.md") if p.stem not in SECTIONS)
    if unknown:
        raise SystemExit(f"{sections}: sections {', '.join(unknown)} have no place in SECTIONS "
                         f"({Path(__file__).name}); add them there")
    parts = [(folder / "intro.md").read_text().rstrip("\n") + "\n"]
    parts += [(sections / f"{name}.md").read_text().rstrip("\n") + "\n" for name in SECTIONS
              if (sections / f"{name}.md").exists()]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    target = HERE / "RESULTS.md"
    text = assemble()
    if "--check" in argv:
        if target.read_text() != text:
            print(f"{target} is not the assembly of intro.md and sections/: run python {__file__}", file=sys.stderr)
            return 1
        return 0
    _atomic_write(target, text)
    print(f"wrote {target}")
    return 0


def notes_marker(script: str) -> str:
    """The line after which a section's hand-written notes start: `script` keeps them on every rewrite."""
    return f"<!-- hand-written notes below: benchmarks/{script} keeps them when it rewrites the section -->"


def publish(text: str, section: Path, marker: str, fallback: Path | None = None) -> Path:
    """Print a script's report and write it to its section file, keeping the section's hand-written notes.
    With `fallback` (the script's default section was not chosen by hand), a report that would drop parts the
    section shows (`lost_parts`: a profile or measurement whose cache is not under this run's --out) goes to
    `fallback` instead, said in one line, so a partial run never erases committed measurements. Returns
    where it wrote."""
    print(text)
    lost = lost_parts(text, section, marker) if fallback is not None else []
    if lost:
        print(f"{section} kept: this report lacks {', '.join(lost)} (not in this run's caches); written to "
              f"{fallback} instead (--section {section} replaces it)", file=sys.stderr)
        section = fallback
    _atomic_write(section, with_notes(text, section, marker))
    return section


def _parts(text: str) -> list[str]:
    """A report's headings and bold lead-ins ("**Throughput.**"), the parts a reader finds it by."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            out.append(line.strip())
        elif line.startswith("**") and "**" in line[2:]:
            out.append(line[: line.index("**", 2) + 2])
    return out


def lost_parts(text: str, section: Path, marker: str) -> list[str]:
    """The parts (`_parts`) of the section file's generated text, before `marker`, that `text` no longer has."""
    old = section.read_text() if section.exists() else ""
    new = set(_parts(text))
    return [p for p in _parts(old[: old.index(marker)] if marker in old else old) if p not in new]


def with_notes(text: str, section: Path, marker: str) -> str:
    """`text`, then the hand-written notes of the section file as it was (from the `marker` line on), if any."""
    old = section.read_text() if section.exists() else ""
    return text if marker not in old else text.rstrip("\n") + "\n\n" + old[old.index(marker):]


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
