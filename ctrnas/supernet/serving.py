"""The serving artifact: a whole CTR model, embedding tables included, as one `torch.export` program.

`model.pt2` maps encoded rows to click probabilities: `dense` float32 [B, n_dense] (already transformed)
and `ids` int64 [B, n_sparse] (already encoded, one id per field, in the schema's field order) ->
probabilities [B]. It loads with `torch.export.load(path).module()` in a Python that has torch alone: the
program holds only ATen operators (the embedding tables' lookups trace to `aten.embedding`), no
pickled module, no ctrnas. The raw-row preprocessing is data beside it (transform.json); `ctrnas predict`
applies both.

Every field holds one id, so the wrapper hands the model the ids [B, F] themselves and each embedding stem
reads its tables' rows (`EmbeddingStem.lookups`: a bag of one id is its row, bit for bit): the program has no
data-dependent shapes, needs no fbgemm operator, and traces in a fraction of the time a KeyedJaggedTensor takes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from ctrnas.files import atomic_path

SERVING_FILE = "model.pt2"


class Serving(nn.Module):
    """`model(dense, kjt) -> logits` as `(dense, ids [B, F]) -> probabilities`."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.model(dense, ids))


def save_serving(model: nn.Module, schema, folder: str | Path) -> Path:
    """Write `folder/model.pt2` (atomic) for a model with `forward(dense, kjt) -> logits` over `schema`."""
    from ctrnas.supernet.stem import EmbeddingStem

    model = model.cpu().eval()
    # tables trained by the fused kernel are views of one buffer (ctrnas.supernet.fused): the program gets
    # copies of their own, so the archive holds each table once and whole
    shared = [(bag, bag.weight) for m in model.modules() if isinstance(m, EmbeddingStem)
              for bag in m.ebc.embedding_bags.values()
              if bag.weight.untyped_storage().nbytes() > bag.weight.numel() * bag.weight.element_size()]
    for bag, w in shared:
        bag.weight = nn.Parameter(w.detach().clone(), requires_grad=w.requires_grad)
    wrapper = Serving(model)
    example = (torch.zeros(2, schema.dense_dim), torch.zeros(2, len(schema.sparse), dtype=torch.int64))
    batch = torch.export.Dim("batch", min=1)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.export.export(wrapper, example, dynamic_shapes=({0: batch}, {0: batch}), strict=False)
    finally:
        for bag, w in shared:
            bag.weight = w
    path = Path(folder) / SERVING_FILE
    with atomic_path(path, suffix=".pt2") as tmp:  # torch.export.save wants the .pt2 extension
        torch.export.save(program, str(tmp))
    return path
