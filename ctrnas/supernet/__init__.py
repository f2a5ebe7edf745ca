"""Blocks, the NASRec weight-sharing supernet, and standalone subnet export.

Public API (stable):
  Supernet(schema, space="nasrec-full", emb_dim=None, row_cap=None)
      forward(dense, kjt, arch=None, full=False) -> logits [B]    (arch path, or full supernet warm-up)
      subnet(arch) -> nn.Module with forward(dense, kjt); parameters() = only what arch uses (shared tensors)
  export(supernet, arch, init="inherit"|"fresh", seed=0) -> ExportedModel (forward(dense, kjt); .net is the
      TorchScript-able part after the embedding lookup)
  save_exported(model, folder, init=, metrics=, torch_export=False) / load_exported(folder): model.pt +
      TorchScript dense_part.pt (+ torch.export dense_part.pt2) + arch.json + model card (ctrnas.supernet.io)
  save_supernet(supernet, path, extra=None) / load_supernet(path) -> (supernet, extra): a checkpoint that
      carries schema + space; load_supernet also reads a bare state_dict given schema= and space=
  count_params(schema, space, arch, include_embeddings=False)   embeddings excluded by default
  count_flops(schema, space, arch)   per example, 2 x MACs of matmuls; embedding lookups excluded
  embedding_bytes(schema, arch, emb_dim, row_cap=None)   float32 bytes of the tables (per-table widths)
  EmbeddingStem (ctrnas.supernet.stem)
"""

from ctrnas.supernet.counting import count_flops, count_params, embedding_bytes
from ctrnas.supernet.export import DenseNet, ExportedModel, export
from ctrnas.supernet.io import load_exported, load_supernet, save_exported, save_supernet
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.supernet.supernet import SubnetView, Supernet

__all__ = ["Supernet", "SubnetView", "export", "ExportedModel", "DenseNet", "count_params", "count_flops", "embedding_bytes",
           "EmbeddingStem", "save_exported", "load_exported", "save_supernet", "load_supernet"]
