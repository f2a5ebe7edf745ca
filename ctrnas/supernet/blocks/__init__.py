"""Supernet ops, one module each: dense FC / Sum / Gating / Dot, sparse EFC / Attention, FM and merge.

Each op holds max-size weights, runs a subnet choice by slicing (`forward(io, x)`), copies its slice into
a standalone module (`extract`), and gives its (params, FLOPs) analytically (`cost`).
"""

from ctrnas.supernet.blocks.attention import Attention
from ctrnas.supernet.blocks.dot import Dot
from ctrnas.supernet.blocks.efc import EFC
from ctrnas.supernet.blocks.fc import FC
from ctrnas.supernet.blocks.fm import FM
from ctrnas.supernet.blocks.gating import Gating
from ctrnas.supernet.blocks.merge import Merge
from ctrnas.supernet.blocks.sum import Sum

DENSE_OP_CLASSES = {"fc": FC, "sum": Sum, "gating": Gating, "dot": Dot}
SPARSE_OP_CLASSES = {"efc": EFC, "attention": Attention}

__all__ = ["FC", "Sum", "Gating", "Dot", "EFC", "Attention", "FM", "Merge", "DENSE_OP_CLASSES", "SPARSE_OP_CLASSES"]
