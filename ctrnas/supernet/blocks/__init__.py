"""Supernet ops, one module each: dense FC / Sum / Gating / Dot / Cross /
Interaction / CIN / Concat, sparse EFC / Attention / none, FM and merge.

Each op holds max-size weights, runs a subnet choice by slicing (`forward(io, x)`), copies its slice into
a standalone module (`extract`), and gives its (params, FLOPs) analytically (`cost`). `BLOCKS` maps the
op table's block keys (`ctrnas.space.ops`) to these classes; the two must agree (checked at import).
"""

from ctrnas.space.ops import OPS, op_spec
from ctrnas.supernet.blocks.attention import Attention
from ctrnas.supernet.blocks.cin import CIN
from ctrnas.supernet.blocks.concat import Concat
from ctrnas.supernet.blocks.cross import Cross
from ctrnas.supernet.blocks.dot import Dot
from ctrnas.supernet.blocks.efc import EFC
from ctrnas.supernet.blocks.fc import FC
from ctrnas.supernet.blocks.fm import FM
from ctrnas.supernet.blocks.gating import Gating
from ctrnas.supernet.blocks.interaction import Interaction
from ctrnas.supernet.blocks.merge import Merge
from ctrnas.supernet.blocks.none import NoTokens
from ctrnas.supernet.blocks.sum import Sum

BLOCKS = {"fc": FC, "sum": Sum, "gating": Gating, "dot": Dot, "cross": Cross, "interaction": Interaction,
          "cin": CIN, "concat": Concat, "efc": EFC, "attention": Attention, "none": NoTokens}


def check_blocks(ops=None, blocks=None) -> None:
    """Every op of the table has a block class and every block class an op (RuntimeError names the strays)."""
    ops, blocks = OPS if ops is None else ops, BLOCKS if blocks is None else blocks
    missing = sorted({s.block for s in ops.values()} - set(blocks))
    stray = sorted(set(blocks) - {s.block for s in ops.values()})
    if missing or stray:
        raise RuntimeError(f"op table and supernet blocks disagree: no class for {missing}, no op for {stray}")


def op_class(name: str):
    """The supernet class of op `name` (through the op table's block key)."""
    return BLOCKS[op_spec(name).block]


check_blocks()

__all__ = ["FC", "Sum", "Gating", "Dot", "Cross", "Interaction", "CIN", "Concat", "NoTokens", "EFC", "Attention", "FM",
           "Merge", "BLOCKS", "op_class", "check_blocks"]
