"""The serving artifact: a whole CTR model, embedding tables included, as one `torch.export` program.

`model.pt2` maps encoded rows to click probabilities: `dense` float32 [B, n_dense] (already transformed)
and `ids` int64 [B, n_sparse] (already encoded, one id per field, in the schema's field order) ->
probabilities [B]. It loads with `torch.export.load(path).module()` in a Python that has torch alone: the
program holds only ATen operators (TorchRec's EmbeddingBagCollection traces to `aten.embedding_bag`), no
pickled module, no ctrnas. The raw-row preprocessing is data beside it (transform.json); `ctrnas predict`
applies both.

We export a wrapper that builds the KeyedJaggedTensor itself with every length 1 and the per-key lengths
given, rather than computed from the lengths tensor (KeyedJaggedTensor.from_lengths_sync), so the program
has no data-dependent shapes and needs no fbgemm operator.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.files import atomic_path

SERVING_FILE = "model.pt2"


class Serving(nn.Module):
    """`model(dense, kjt) -> logits` as `(dense, ids [B, F]) -> probabilities`."""

    def __init__(self, model: nn.Module, names: list[str], caps: list[int] | None = None):
        super().__init__()
        self.model, self.names = model, list(names)
        self.register_buffer("caps", torch.tensor(caps, dtype=torch.int64) if caps else None)

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        b, f = ids.shape
        if self.caps is not None:
            ids = ids % self.caps  # the stem's row cap, folded here (see save_serving)
        kjt = KeyedJaggedTensor(keys=self.names, values=ids.t().reshape(-1),
                                lengths=torch.ones(b * f, dtype=torch.int32),
                                offsets=torch.arange(b * f + 1, dtype=torch.int32), stride=b,
                                length_per_key=[b] * f, offset_per_key=[i * b for i in range(f + 1)])
        return torch.sigmoid(self.model(dense, kjt))


def save_serving(model: nn.Module, schema, folder: str | Path) -> Path:
    """Write `folder/model.pt2` (atomic) for a model with `forward(dense, kjt) -> logits` over `schema`."""
    import logging

    from ctrnas.supernet.stem import EmbeddingStem

    model = model.cpu().eval()
    # a capped stem folds ids into a new KJT whose per-key lengths depend on the data: fold them in the
    # wrapper instead and trace the stems without their cap (every stem of a model has the same schema and
    # cap, e.g. a baseline's LR term and its embeddings; folding twice gives the same ids)
    capped = [m for m in model.modules() if isinstance(m, EmbeddingStem) and m.row_cap]
    cap = [m.row_cap for m in capped]
    if len(set(cap)) > 1:
        raise ValueError(f"stems with different row caps {sorted(set(cap))}: cannot fold ids once")
    # tables trained by the fused kernel are views of one buffer (ctrnas.supernet.fused): the program gets
    # copies of their own, so the archive holds each table once and whole
    shared = [(bag, bag.weight) for m in model.modules() if isinstance(m, EmbeddingStem)
              for bag in m.ebc.embedding_bags.values()
              if bag.weight.untyped_storage().nbytes() > bag.weight.numel() * bag.weight.element_size()]
    for bag, w in shared:
        bag.weight = nn.Parameter(w.detach().clone(), requires_grad=w.requires_grad)
    wrapper = Serving(model, list(schema.sparse_names), list(capped[0].rows) if capped else None)
    example = (torch.zeros(2, schema.dense_dim), torch.zeros(2, len(schema.sparse), dtype=torch.int64))
    batch = torch.export.Dim("batch", min=1)
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # TorchRec warns that tracing its to_dict is slow (seconds, once)
    try:
        for m in capped:
            m.row_cap = None
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.export.export(wrapper, example, dynamic_shapes=({0: batch}, {0: batch}), strict=False)
    finally:
        root.setLevel(level)
        for m, c in zip(capped, cap):
            m.row_cap = c
        for bag, w in shared:
            bag.weight = w
    path = Path(folder) / SERVING_FILE
    with atomic_path(path, suffix=".pt2") as tmp:  # torch.export.save wants the .pt2 extension
        torch.export.save(program, str(tmp))
    return path
