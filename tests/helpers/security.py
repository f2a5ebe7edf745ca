"""Helpers of the security tests (tests/security): code to plant in files, and the one-line error check."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch


class Payload:
    """Unpickling this creates `marker` (a stand-in for any code a hostile file could run)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


class Planter:
    """Writes payload files and checks that none ran; handed to tests as the `plant` fixture."""

    def __init__(self, tmp: Path):
        self.marker = tmp / "MARKER"

    def torch_file(self, path: Path, wrap=lambda p: p) -> Path:
        """A torch zip file whose pickle runs the payload (what torch.load(weights_only=False) would run)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(wrap(Payload(self.marker)), path)
        return path

    def raw_pickle(self, path: Path, wrap=lambda p: p) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(wrap(Payload(self.marker))))
        return path

    def ran(self) -> bool:
        return self.marker.exists()


def one_line_error(rc: int, err: str) -> str:
    """The CLI failed with one line on stderr and no traceback; returns the line."""
    lines = [s for s in err.splitlines() if s.strip()]
    assert rc not in (0, None), err
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def criteo_lines(n: int, seed: int = 0) -> list[str]:
    """Well-formed Criteo lines (label, 13 counts, 26 hashes) with some empty fields."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        dense = ["" if rng.random() < 0.2 else str(int(rng.integers(0, 500))) for _ in range(13)]
        sparse = ["" if rng.random() < 0.1 else f"{int(rng.integers(0, 2**32)):08x}" for _ in range(26)]
        out.append("\t".join([str(int(rng.random() < 0.3))] + dense + sparse))
    return out


def as_ctrnas_wrote(folder: Path, *files: str) -> None:
    """List `files` in `folder`'s ownership manifest, as in a folder ctrnas wrote and someone then handed on
    (whoever hands a folder on controls its manifest too), so the command reads them instead of refusing the
    folder as holding files ctrnas did not write."""
    import json

    from ctrnas.data.ownership import MANIFEST, MANIFEST_FORMAT

    folder.mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(json.dumps({"format": MANIFEST_FORMAT, "files": sorted(files)}))


def run(capsys, *argv) -> tuple[int, str]:
    """`ctrnas ARGV` in this process: (exit code, what it printed to stderr)."""
    from ctrnas.cli import main

    capsys.readouterr()
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err
