"""DLRM (Naumov et al. 2019) from torchrec's DenseArch / InteractionArch / OverArch on the shared stem."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torchrec.models.dlrm import DenseArch, InteractionArch, OverArch

from ctrnas.data.schema import DatasetSchema
from ctrnas.supernet.stem import EmbeddingStem


class DLRM(nn.Module):
    """Bottom MLP maps dense features to one D-vector; pairwise dot products of it and the F field
    embeddings (upper triangle), concatenated with it, go through the top MLP to a logit."""

    def __init__(self, schema: DatasetSchema, dim: int = 16, row_cap: int | None = None,
                 bottom: Sequence[int] = (64,), top: Sequence[int] = (256, 128)):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim, row_cap)
        n_dense = max(schema.dense_dim, 1)  # a dataset without dense features gets one constant input
        self.dense_arch = DenseArch(n_dense, [*bottom, dim])
        f = len(schema.sparse)
        self.interaction = InteractionArch(num_sparse_features=f)
        self.over_arch = OverArch(dim + f * (f + 1) // 2, [*top, 1])

    def forward(self, dense: torch.Tensor, kjt) -> torch.Tensor:
        if dense.shape[1] == 0:
            dense = dense.new_ones(dense.shape[0], 1)
        x = self.interaction(self.dense_arch(dense), self.stem(kjt))
        return self.over_arch(x).squeeze(1)
