"""Arrow columns as numpy views equal pyarrow's own conversion, and reading batches leaves pandas unimported."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from ctrnas.data.arrow import column_numpy


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.int8])
def test_a_column_equals_to_numpy_also_sliced(dtype):
    values = (np.arange(1000) * 7 % 251 - 100).astype(dtype)
    arr = pa.array(values)
    for part in (arr, arr.slice(13, 500), arr.slice(999)):
        got = column_numpy(part)
        assert got.dtype == part.to_numpy().dtype
        np.testing.assert_array_equal(got, part.to_numpy(zero_copy_only=False))


def test_nulls_and_other_types_go_through_pyarrow():
    with_nulls = pa.array([1.5, None, 3.0])
    np.testing.assert_array_equal(column_numpy(with_nulls), [1.5, np.nan, 3.0])
    np.testing.assert_array_equal(column_numpy(pa.array([True, False])), [True, False])


def test_reading_training_batches_imports_no_pandas(tmp_path):
    from ctrnas.data.synthetic import generate

    generate("criteo", 2000, seed=0, out=tmp_path / "d", chunk_rows=4096, calibration_rows=4096)
    code = ("import sys; from ctrnas.data.loader import CtrBatchLoader; "
            f"n = sum(b.labels.numel() for b in CtrBatchLoader({str(tmp_path / 'd')!r}, 'train', 64)); "
            "print(n, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows, pandas = done.stdout.split()
    assert int(rows) > 0 and pandas == "False"
