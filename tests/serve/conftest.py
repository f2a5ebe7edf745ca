"""The real-format samples: written by the tests, and the workspace's genuine files where present; and the
criteo models several serving tests read, exported once per test run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.samples import SOURCES, sample
from tests.helpers.serve import prepared_and_exported


@pytest.fixture(params=SOURCES)
def criteo_sample(request) -> Path:
    return sample("criteo", request.param)


@pytest.fixture(params=SOURCES)
def avazu_sample(request) -> Path:
    return sample("avazu", request.param)


@pytest.fixture(scope="session")
def criteo_exported(once, tmp_path_factory):
    """`criteo_exported(source="generated", arch="dlrm-like", row_cap=None)` -> (dataset folder, model folder):
    `prepared_and_exported` of the criteo sample from `source` at 500 hash buckets, made once for the whole
    test run. Read only: a test that changes the model folder copies it first."""

    def get(source: str = "generated", arch: str = "dlrm-like", row_cap: int | None = None) -> tuple[Path, Path]:
        def build(folder: Path):
            folder.mkdir(parents=True)
            prepared_and_exported(folder, "criteo", [str(sample("criteo", source))], arch=arch, row_cap=row_cap,
                                  hash_buckets=500)

        folder = once(tmp_path_factory, f"serve-criteo-{source}-{arch}-{row_cap}", build)
        return folder / "criteo-data", folder / "criteo-model"

    return get
