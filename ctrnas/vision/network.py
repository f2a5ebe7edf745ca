"""The NB201 network (Dong & Yang 2020, Fig. 1; `TinyNetwork` + `InferCell` of the NB201 code), in plain torch.

stem (3x3 conv, BN) -> N cells at C -> residual reduction -> N cells at 2C -> residual reduction ->
N cells at 4C -> BN-ReLU -> global average pool -> linear classifier. NB201 uses C = 16, N = 5.
Ops are NB201's: ReLU-Conv-BN for the convs, affine BN with running statistics.
"""

from __future__ import annotations

import torch
from torch import nn

from ctrnas.vision.space import EDGES, NB201Cell


class ReLUConvBN(nn.Sequential):
    """ReLU -> Conv2d (no bias) -> BatchNorm2d: NB201's `nor_conv_*` op."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: int):
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(c_out),
        )


class Zero(nn.Module):
    """The `none` op: zeros of the output's shape (keeps the graph, so gradients are exactly zero)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.c_in, self.c_out, self.stride = c_in, c_out, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.c_in == self.c_out:
            return x.mul(0.0) if self.stride == 1 else x[:, :, :: self.stride, :: self.stride].mul(0.0)
        shape = list(x.shape)
        shape[1] = self.c_out
        shape[2] = (shape[2] + self.stride - 1) // self.stride
        shape[3] = (shape[3] + self.stride - 1) // self.stride
        return x.new_zeros(shape)


class AvgPool(nn.Module):
    """`avg_pool_3x3`: a 1x1 ReLU-Conv-BN first only when the channel count changes (NB201 `POOLING`)."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.preprocess = None if c_in == c_out else ReLUConvBN(c_in, c_out, 1, 1, 0)
        self.pool = nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x if self.preprocess is None else self.preprocess(x))


class FactorizedReduce(nn.Module):
    """`skip_connect` across a stride or channel change: two offset 1x1 convs, concatenated, then BN."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.relu = nn.ReLU(inplace=False)
        if stride == 2:
            half = c_out // 2
            self.convs = nn.ModuleList(
                [nn.Conv2d(c_in, half, 1, stride=2, bias=False), nn.Conv2d(c_in, c_out - half, 1, stride=2, bias=False)]
            )
            self.pad = nn.ConstantPad2d((0, 1, 0, 1), 0)
        else:
            self.convs = nn.ModuleList([nn.Conv2d(c_in, c_out, 1, stride=1, bias=False)])
            self.pad = None
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(x)
        if self.pad is None:
            return self.bn(self.convs[0](x))
        y = self.pad(x)
        return self.bn(torch.cat([self.convs[0](x), self.convs[1](y[:, :, 1:, 1:])], dim=1))


def make_op(name: str, c_in: int, c_out: int, stride: int) -> nn.Module:
    """NB201's OPS table (affine BN, tracked running stats)."""
    if name == "none":
        return Zero(c_in, c_out, stride)
    if name == "skip_connect":
        return nn.Identity() if stride == 1 and c_in == c_out else FactorizedReduce(c_in, c_out, stride)
    if name == "nor_conv_1x1":
        return ReLUConvBN(c_in, c_out, 1, stride, 0)
    if name == "nor_conv_3x3":
        return ReLUConvBN(c_in, c_out, 3, stride, 1)
    if name == "avg_pool_3x3":
        return AvgPool(c_in, c_out, stride)
    raise ValueError(name)  # unreachable: NB201Cell validates op names


class InferCell(nn.Module):
    """One NB201 cell: node j = sum over i < j of op_(i,j)(node i); the output is node 3."""

    def __init__(self, cell: NB201Cell, c_in: int, c_out: int):
        super().__init__()
        self.cell = cell
        # Edges out of the input node see c_in channels; all others c_out (NB201 InferCell).
        self.edges = nn.ModuleList(
            make_op(op, c_in if src == 0 else c_out, c_out, 1) for (src, _), op in zip(EDGES, cell.ops)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for target in (1, 2, 3):
            nodes.append(sum(self.edges[k](nodes[s]) for k, (s, t) in enumerate(EDGES) if t == target))
        return nodes[3]


class ResNetBasicBlock(nn.Module):
    """NB201's residual reduction block: two 3x3 ReLU-Conv-BN (first strided) + avgpool-1x1conv shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int = 2):
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, stride, 1)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1, 1)
        self.downsample = nn.Sequential(
            nn.AvgPool2d(kernel_size=2, stride=2, padding=0), nn.Conv2d(c_in, c_out, 1, bias=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.conv_b(self.conv_a(x))


class NB201Network(nn.Module):
    """NB201's `TinyNetwork`: returns the logits (NB201 returns (features, logits); proxies need logits)."""

    def __init__(self, cell: NB201Cell, num_classes: int = 10, channels: int = 16, cells_per_stage: int = 5):
        super().__init__()
        self.cell = cell
        c = channels
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        layers: list[nn.Module] = []
        c_prev = c
        for stage, width in enumerate((c, 2 * c, 4 * c)):
            if stage > 0:
                layers.append(ResNetBasicBlock(c_prev, width, 2))
                c_prev = width
            layers.extend(InferCell(cell, c_prev, width) for _ in range(cells_per_stage))
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(c_prev), nn.ReLU(inplace=False))
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_prev, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.lastact(self.cells(self.stem(images)))
        return self.classifier(torch.flatten(self.global_pooling(x), 1))


def build_network(cell: NB201Cell | str, num_classes: int = 10, seed: int | None = None, **kwargs) -> NB201Network:
    """Build an NB201 network; with `seed`, its initial weights come from that seed only (no global RNG)."""
    if isinstance(cell, str):
        cell = NB201Cell.from_str(cell)
    if seed is None:
        return NB201Network(cell, num_classes, **kwargs)
    # nn.Module init draws from the global generator; fork it so the caller's RNG state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return NB201Network(cell, num_classes, **kwargs)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
