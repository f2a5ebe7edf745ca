"""Shared helpers of the data tests: paths of the real samples and tiny raw-file writers."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.samples import avazu_sample, criteo_sample, need, sample


def criteo_line(rng: np.random.Generator, label: int | None = None) -> str:
    """One well-formed Criteo line with some empty fields."""
    lab = int(rng.random() < 0.3) if label is None else label
    dense = ["" if rng.random() < 0.2 else str(int(rng.integers(-2, 5000))) for _ in range(13)]
    sparse = ["" if rng.random() < 0.1 else f"{int(rng.integers(0, 2**32)):08x}" for _ in range(26)]
    return "\t".join([str(lab)] + dense + sparse)


def write_text(path: Path, lines: list[str], newline: str = "\n", gz: bool = False, final_newline=True) -> Path:
    data = newline.join(lines) + (newline if final_newline else "")
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(data.encode())
    else:
        path.write_bytes(data.encode())
    return path


def kdd_line(rng: np.random.Generator) -> str:
    imps = int(rng.integers(1, 5))
    clicks = int(rng.integers(0, imps + 1)) if rng.random() < 0.3 else 0
    ids = [str(int(rng.integers(0, 2**63))) if k == 0 else str(int(rng.integers(0, 1000))) for k in range(8)]
    # Click Impression DisplayURL AdID AdvertiserID Depth Position QueryID KeywordID TitleID DescriptionID UserID
    return "\t".join([str(clicks), str(imps), ids[0], ids[1], ids[2], str(int(rng.integers(1, 4))),
                      str(int(rng.integers(1, 4))), ids[3], ids[4], ids[5], ids[6], ids[7]])


class RawFiles:
    """Helpers handed to tests as the `raw` fixture (test modules cannot import conftest in importlib mode)."""

    need = staticmethod(need)
    sample = staticmethod(sample)  # sample(kind, source): also the workspace's genuine files (SOURCES)
    criteo_line = staticmethod(criteo_line)
    kdd_line = staticmethod(kdd_line)
    write_text = staticmethod(write_text)


    @property
    def criteo_sample(self) -> Path:  # written by the tests (tests.helpers.samples)
        return criteo_sample()

    @property
    def avazu_sample(self) -> Path:
        return avazu_sample()


@pytest.fixture
def raw():
    return RawFiles()
