import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ctrnas.data.dataset import DatasetWriter, load_schema, read_meta, split_files
from ctrnas.data.schema import DatasetSchema, SparseFeature
from ctrnas.errors import CtrnasError

ARROW = pa.schema([("label", pa.float32()), ("I1", pa.float32()), ("C1", pa.int64())])
SCHEMA = DatasetSchema("label", ("I1",), (SparseFeature("C1", 7),))


def _table(n, start=0):
    return pa.table({"label": [float(i % 2) for i in range(start, start + n)],
                     "I1": [float(i) for i in range(start, start + n)],
                     "C1": [i % 7 for i in range(start, start + n)]})


def test_shards_roll_over_and_round_trip(tmp_path):
    w = DatasetWriter(tmp_path, ARROW, rows_per_shard=4)
    w.write("train", _table(6))
    w.write("train", _table(5, 6))
    w.write("val", _table(2))
    meta = w.finish({"schema": SCHEMA.to_json()})
    files = split_files(tmp_path, "train")
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    rows = pq.read_table(files).column("I1").to_pylist()
    assert rows == [float(i) for i in range(11)]
    assert meta["splits"]["train"]["rows"] == 11 and meta["splits"]["test"]["rows"] == 0
    assert pq.read_table(split_files(tmp_path, "test")).num_rows == 0
    assert load_schema(tmp_path) == SCHEMA


def test_folder_without_meta_is_incomplete_and_rewrite_clears_old_shards(tmp_path):
    w = DatasetWriter(tmp_path, ARROW, rows_per_shard=2)
    w.write("train", _table(6))
    w.finish({"schema": SCHEMA.to_json()})
    w2 = DatasetWriter(tmp_path, ARROW, rows_per_shard=2)  # a re-run starts by removing meta.json
    with pytest.raises(CtrnasError, match="no meta.json"):
        read_meta(tmp_path)
    w2.write("train", _table(1))
    w2.finish({"schema": SCHEMA.to_json()})
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["part-00000.parquet"]
    assert json.loads((tmp_path / "meta.json").read_text())["splits"]["train"]["rows"] == 1
