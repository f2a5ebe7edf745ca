"""Criteo Kaggle `train.txt` and Terabyte `day_N`: label, I1-I13, C1-C26, tab-separated, no header.

Empty fields are missing values. I1-I13 are counts (I2 can be negative); C1-C26 are 32-bit hashes
written as 8 hex digits, keyed by their integer value (so hash ids equal NASRec's
`int(x, 16) fmod (n - 1) + 1`). Gzip input (`train.txt.gz`, `day_0.gz`) is read as it streams.
"""

from __future__ import annotations

from ctrnas.data.readers.records import first_line
from ctrnas.data.readers.rows import DelimitedReader

DENSE = [f"I{i}" for i in range(1, 14)]
SPARSE = [f"C{i}" for i in range(1, 27)]


class CriteoReader(DelimitedReader):
    format = "criteo"

    def __init__(self, paths: list[str], cfg):
        super().__init__(paths, cfg, ["label"] + DENSE + SPARSE, DENSE, [(c, "hex") for c in SPARSE],
                         delimiter="\t")

    def describe(self) -> dict:
        return {"format": "criteo", "layout": "label, I1-I13 (counts), C1-C26 (8-hex-digit hashes), tab-separated"}


def has_labels(cfg, path: str) -> bool:
    """Whether a Criteo file holds the label column: its first line has 40 fields (39 without)."""
    return first_line(path).count("\t") + 1 != 39
