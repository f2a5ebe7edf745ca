"""Fixtures of the security tests: a small prepared folder, a model exported from it, and code to plant."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from tests.helpers.security import Payload, Planter


@pytest.fixture
def plant(tmp_path) -> Planter:
    p = Planter(tmp_path)
    # the payload itself works: unpickling it does create the marker
    pickle.loads(pickle.dumps(Payload(tmp_path / "probe")))
    assert (tmp_path / "probe").exists()
    return p


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory, once) -> Path:
    """3000 synthetic Criteo rows, made once for the whole test run (tests copy it before changing it)."""
    from ctrnas.data.synthetic import generate

    return once(tmp_path_factory, "sec-data", lambda out: generate("criteo", 3000, 5, out, chunk_rows=3000))


@pytest.fixture(scope="session")
def model_dir(data_dir, tmp_path_factory, once) -> Path:
    """A real exported model folder (fresh weights) with the dataset's schema, exported once for the run."""
    from ctrnas import api
    from ctrnas.space.baselines import baseline_arch

    def build(folder: Path):
        folder.mkdir()
        (folder / "arch.json").write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
        api.export_arch(str(folder / "arch.json"), folder / "model", data_dir=data_dir, space="ctrnas-small",
                        emb_dim=4, init="fresh", seed=1)

    return once(tmp_path_factory, "sec-model", build) / "model"
