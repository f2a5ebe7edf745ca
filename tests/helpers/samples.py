"""Real-format CTR samples written by the tests themselves, so a fresh clone needs nothing beside it.

`criteo_sample()` and `avazu_sample()` write (once per process, into a temporary folder) 100-row files with the
quirks of the genuine files that the readers handle: Criteo Kaggle `train.txt` lines (label, I1-I13, C1-C26,
tab-separated, no header) with empty fields, negative counts and 53 rows ending in 2 or 3 empty fields (the
rows a stripped copy cuts to 37 or 38 fields); Avazu `train` lines with the header, `id` values beyond int64,
hex ids, `hour` as YYMMDDHH and negative integers (C20 = -1); and KDD Cup 2012 `training.txt` with its
`userid_profile.txt` (`kdd_sample()`). Their first rows carry the values the tests check by hand. The genuine 100-row samples of the project workspace (`../shared/data/ctr`, PaddleRec and
DeepCTR sample data) are an extra check where present: `SOURCES` lists them then.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np

SHARED_CTR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "ctr"
SHARED = {"criteo": SHARED_CTR / "criteo_kaggle_sample.tsv", "avazu": SHARED_CTR / "avazu_sample.csv"}
# "generated" always; "shared" only where the workspace's genuine samples are present (never a skip)
SOURCES = ("generated",) + (("shared",) if all(p.exists() for p in SHARED.values()) else ())

ROWS = 100
CRITEO_SHORT = 53  # rows ending in 2 or 3 empty fields
AVAZU_HEADER = ("id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,app_domain,app_category,"
                "device_id,device_ip,device_model,device_type,device_conn_type,C14,C15,C16,C17,C18,C19,C20,C21")


@functools.cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="ctrnas-samples-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # ours alone: gone when the test process ends
    return folder


def _hex(rng, pool: int | None = None) -> str:
    return f"{int(rng.integers(0, pool)) * 2654435761 % 2**32:08x}" if pool else f"{int(rng.integers(0, 2**32)):08x}"


def criteo_lines(seed: int = 0) -> list[str]:
    """100 Criteo Kaggle lines (see the module docstring); line 1: I1 empty, I5 = 13275, C1 = 05db9164."""
    rng = np.random.default_rng(seed)
    clicks = set(rng.choice(ROWS, 29, replace=False).tolist())
    short = set(rng.choice(ROWS, CRITEO_SHORT, replace=False).tolist())
    lines = []
    for r in range(ROWS):
        dense = ["" if rng.random() < 0.25 else str(int(rng.integers(0, 40) ** rng.integers(1, 3))) for _ in range(13)]
        dense[1] = str(int(rng.integers(-3, 2))) if rng.random() < 0.5 else dense[1]  # I2 has -1, -2, -3
        sparse = ["" if rng.random() < 0.1 else _hex(rng, 6 if k < 4 else None) for k in range(26)]
        if r in short:  # the last 2 or 3 fields empty, the one before set
            k = int(rng.integers(2, 4))
            sparse[-k:] = [""] * k
            sparse[-k - 1] = _hex(rng)
        else:
            sparse[-1] = _hex(rng)
        if r == 0:  # the values tests check by hand
            dense[0], dense[4], sparse[0] = "", "13275", "05db9164"
        lines.append("\t".join([str(int(r in clicks))] + dense + sparse))
    return lines


def avazu_lines(seed: int = 0) -> list[str]:
    """The header and 100 Avazu lines; line 2 (the first row): id 1000009418151094273, hour 14102100, C20 -1."""
    rng = np.random.default_rng(seed)
    clicks = set(rng.choice(ROWS, 20, replace=False).tolist())
    rows = [AVAZU_HEADER]
    for r in range(ROWS):
        ident = 1000009418151094273 if r == 0 else int(rng.integers(10**17, 2**63)) * 2 + int(rng.integers(0, 2))
        hour = 14102100 + (int(rng.integers(0, 3)) * 100 + int(rng.integers(0, 24)) if r else 0)  # 21-23 Oct 2014
        c20 = "-1" if r == 0 or rng.random() < 0.4 else str(int(rng.integers(100000, 100300)))
        cols = [str(ident), str(int(r in clicks)), str(hour), str(int(rng.choice([1005, 1002, 1010]))),
                str(int(rng.integers(0, 2))), *(_hex(rng, 8) for _ in range(7)), _hex(rng), _hex(rng, 30),
                str(int(rng.integers(0, 2))), str(int(rng.choice([0, 2]))),
                *(str(int(rng.integers(15000, 21000))) for _ in range(1)), "320", "50",
                str(int(rng.integers(1700, 2400))), str(int(rng.integers(0, 4))), str(int(rng.integers(30, 1000))),
                c20, str(int(rng.integers(15, 200)))]
        rows.append(",".join(cols))
    return rows


@functools.cache
def criteo_sample() -> Path:
    path = _folder() / "criteo_kaggle_sample.tsv"
    path.write_text("\n".join(criteo_lines()) + "\n")
    return path


@functools.cache
def avazu_sample() -> Path:
    path = _folder() / "avazu_sample.csv"
    path.write_text("\n".join(avazu_lines()) + "\n")
    return path


def kdd_lines(seed: int = 0) -> tuple[list[str], list[str]]:
    """(training.txt lines, userid_profile.txt lines) of KDD Cup 2012 track 2: `Click Impression DisplayURL AdID
    AdvertiserID Depth Position QueryID KeywordID TitleID DescriptionID UserID`, DisplayURL up to 2^64 - 1
    (beyond int64), clicks from 0 to the impressions, users with and without a profile (`UserID Gender Age`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(ROWS):
        imps = int(rng.integers(1, 5))
        clicks = int(rng.integers(0, imps + 1)) if rng.random() < 0.3 else 0
        url = 2**64 - 1 if r == 0 else int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
        depth = int(rng.integers(1, 4))
        ids = [str(int(rng.integers(0, 50))) for _ in range(6)]
        rows.append("\t".join([str(clicks), str(imps), str(url), ids[0], ids[1], str(depth),
                               str(int(rng.integers(1, depth + 1))), *ids[2:], str(int(rng.integers(0, 40)))]))
    profile = [f"{u}\t{u % 3}\t{u % 6 + 1}" for u in range(0, 40, 2)]  # odd users have none
    return rows, profile


@functools.cache
def kdd_sample() -> tuple[Path, Path]:
    """(training.txt, userid_profile.txt) written once per process (`kdd_lines`)."""
    rows, profile = kdd_lines()
    folder = _folder() / "kdd2012"
    folder.mkdir(exist_ok=True)
    (folder / "training.txt").write_text("\n".join(rows) + "\n")
    (folder / "userid_profile.txt").write_text("\n".join(profile) + "\n")
    return folder / "training.txt", folder / "userid_profile.txt"


def sample(kind: str, source: str = "generated") -> Path:
    """The sample of format `kind` ("criteo" or "avazu") from `source` (one of SOURCES)."""
    if source == "shared":
        return SHARED[kind]
    return criteo_sample() if kind == "criteo" else avazu_sample()


def need(path: Path) -> Path:
    """`path` (kept for the tests written when the samples were only in the workspace)."""
    return path
