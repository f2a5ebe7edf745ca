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
def data_dir(tmp_path_factory) -> Path:
    from ctrnas.data.synthetic import generate

    out = tmp_path_factory.mktemp("sec") / "data"
    generate("criteo", 3000, 5, out, chunk_rows=3000)
    return out


@pytest.fixture(scope="session")
def model_dir(data_dir, tmp_path_factory) -> Path:
    """A real exported model folder (fresh weights) with the dataset's schema."""
    from ctrnas import api
    from ctrnas.space.baselines import baseline_arch

    tmp = tmp_path_factory.mktemp("secmodel")
    (tmp / "arch.json").write_text(json.dumps(baseline_arch("dlrm-like").to_json()))
    api.export_arch(str(tmp / "arch.json"), tmp / "model", data_dir=data_dir, space="ctrnas-small", emb_dim=4,
                    init="fresh", seed=1)
    return tmp / "model"
