"""Raw-result JSON files of the benchmark scripts, kept under benchmarks/out/ so a report can be rebuilt."""

from __future__ import annotations

import json
from pathlib import Path


def save(out: Path, name: str, obj) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(obj, indent=1, default=float))


def load(out: Path, name: str):
    p = out / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None
