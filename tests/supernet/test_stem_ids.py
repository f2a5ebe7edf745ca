"""The stem's serving input, ids [B, F] with one id per field, reads the same rows as the KeyedJaggedTensor path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ctrnas.serving.predict import kjt_of
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.supernet.testing import make_schema


@pytest.mark.parametrize("row_cap, widths", [(None, None), (20, None), (20, (4, 0, 2, 4))])
def test_ids_give_the_kjt_lookups_bit_for_bit(row_cap, widths):
    schema = make_schema(cards=(50, 7, 30, 11))
    torch.manual_seed(0)
    stem = EmbeddingStem(schema, dim=4, row_cap=row_cap, widths=widths).eval()
    rng = np.random.default_rng(1)
    ids = np.stack([rng.integers(0, c, 9) for c in (50, 7, 30, 11)], 1)  # beyond the cap too: folded alike
    with torch.no_grad():
        want = stem(kjt_of(ids, schema.sparse_names))
        got = stem(torch.from_numpy(ids))
    assert got.shape == (9, 4, 4)
    assert torch.equal(got, want)
