"""Hashed tables sized by the data: small fields get small tables, and a model trains as well on them."""

from __future__ import annotations

import numpy as np

from ctrnas import api
from ctrnas.data.dataset import read_meta
from ctrnas.data.prepare import prepare
from ctrnas.data.prepare_config import PrepareConfig
from ctrnas.train.config import TrainConfig

BUCKETS = 50_000


def clicks_file(path, n=6000, seed=0):
    """Criteo-format rows whose clicks follow C1 (4 values) and C2 (30 values); C3 has ~3000 values and
    C4, C6, ... always missing, C5, C7, ... one value each."""
    rng = np.random.default_rng(seed)
    c1, c2 = rng.integers(0, 2**32, 4), rng.integers(0, 2**32, 30)
    e1, e2 = rng.normal(0, 1.5, 4), rng.normal(0, 1.0, 30)
    i1, i2 = rng.integers(0, 4, n), rng.integers(0, 30, n)
    y = rng.random(n) < 1 / (1 + np.exp(-(e1[i1] + e2[i2] - 1.0)))
    rest = rng.integers(0, 2**32, 23)
    lines = []
    for k in range(n):
        sparse = [f"{c1[i1[k]]:08x}", f"{c2[i2[k]]:08x}", f"{int(rng.integers(0, 2**32)) % 3000 * 7919:08x}"]
        sparse += [f"{v:08x}" if j % 2 else "" for j, v in enumerate(rest)]
        lines.append("\t".join([str(int(y[k]))] + [str(int(rng.integers(0, 9))) for _ in range(13)] + sparse))
    path.write_text("\n".join(lines) + "\n")
    return c1, c2


def test_small_fields_get_small_tables_and_the_same_model_quality(tmp_path):
    c1, c2 = clicks_file(tmp_path / "day.tsv")
    metas, losses = {}, {}
    for size in ("buckets", "data"):
        out = tmp_path / size
        prepare("criteo", [str(tmp_path / "day.tsv")], out,
                PrepareConfig(hash_buckets=BUCKETS, hash_table_size=size, progress=False))
        metas[size] = read_meta(out)
        m, _ = api.train_model(out, TrainConfig(batch_size=128, epochs=2, embedding_dim=4, seed=1), baseline="lr",
                               out_dir=tmp_path / f"train-{size}")
        losses[size] = m["test"]["logloss"]
    card = {size: [f["cardinality"] for f in metas[size]["schema"]["sparse"]] for size in metas}
    distinct1 = len({1 + int(v) % (BUCKETS - 1) for v in c1})
    distinct2 = len({1 + int(v) % (BUCKETS - 1) for v in c2})
    assert card["data"][:2] == [distinct1 + 2, distinct2 + 2] == [6, 32]
    assert card["data"][3] == 2 and card["data"][4] == 3  # C4 always missing: rows 0, 1; C5 one value
    t = metas["data"]["transforms"]
    assert (t["C1"]["encoding"], t["C1"]["buckets"], t["C1"]["distinct_ids"], t["C1"]["table_rows"]) == \
        ("hash+rows", BUCKETS, 4, 6)
    assert t["C4"]["encoding"] == "hash" and t["C4"]["table_rows"] == 2  # nothing to shrink
    assert sum(card["buckets"]) > 20 * sum(card["data"])  # as hashed, each table reaches its largest id
    # every accepted row is in both folders; the model learns the same from both
    assert metas["data"]["rows"] == metas["buckets"]["rows"]
    ctr = metas["data"]["splits"]["test"]["ctr"]
    constant = -(ctr * np.log(ctr) + (1 - ctr) * np.log(1 - ctr))
    assert losses["data"] < constant - 0.03 and losses["buckets"] < constant - 0.03
    assert abs(losses["data"] - losses["buckets"]) < 0.01, losses
