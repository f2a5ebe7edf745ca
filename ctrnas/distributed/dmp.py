"""Shard a CTR model's embedding tables with TorchRec's DistributedModelParallel (DMP).

Every `EmbeddingBagCollection` in the model (each `EmbeddingStem`'s `.ebc`) is sharded across the ranks;
everything else stays a plain replicated module whose gradients `ctrnas.distributed.reduce` all-reduces.
The tables use the FBGEMM "fused" kernel with EXACT_ADAGRAD fused into backward, which is the same
update as the trainer's row-sparse torch Adagrad (momentum += g^2; w -= lr g / (sqrt(momentum) + eps)).

What works on CPU (docs/cpu.md): the planner offers table_wise, column_wise, table_column_wise and
data_parallel; row_wise only works from a hand-built plan, so any explicit `sharding_type` is built by
hand with `torchrec.distributed.sharding_plan` (deterministic, no communication). The planner runs on every
rank with `plan()`, never `collective_plan()`: if planning fails on one rank, the collective version
leaves the others waiting in a broadcast for ever.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from ctrnas.errors import CtrnasError, RecipeError

SHARDING_TYPES = ("table_wise", "row_wise", "column_wise", "table_column_wise", "data_parallel")


@dataclass(frozen=True)
class ShardingConfig:
    """How the tables are split: `sharding_type` None lets TorchRec's planner choose per table.

    lr/eps only seed the fused optimizer; the distributed trainer sets the LR every step.
    """

    sharding_type: str | None = None
    lr: float = 0.12
    eps: float = 1e-2

    def __post_init__(self):
        if self.sharding_type is not None and self.sharding_type not in SHARDING_TYPES:
            raise RecipeError("ShardingConfig", "sharding_type",
                              f"expected one of {', '.join(SHARDING_TYPES)} or null, got {self.sharding_type!r}")


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job: rank, world size, device and collective backend."""

    rank: int
    world_size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def default_backend() -> str:
    """nccl when this process has a GPU, gloo otherwise (the only backend on CPU)."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_distributed(backend: str | None = None, timeout_s: float = 300.0) -> DistEnv:
    """Join the process group described by torchrun's env vars (RANK, WORLD_SIZE, MASTER_ADDR, ...).

    Already-initialised groups (e.g. from a test's spawn helper) are reused. The timeout bounds how long a
    rank waits for a peer that has failed, instead of hanging the job.
    """
    if not dist.is_initialized():
        backend = backend or default_backend()
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    backend = dist.get_backend()
    rank, world = dist.get_rank(), dist.get_world_size()
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank % max(torch.cuda.device_count(), 1)))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    return DistEnv(rank, world, device, backend)


def embedding_collections(model: nn.Module) -> dict[str, nn.Module]:
    """The model's EmbeddingBagCollections by module path (e.g. 'stem.ebc'), in module order."""
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    return {name: m for name, m in model.named_modules() if isinstance(m, EmbeddingBagCollection)}


def make_sharder(cfg: ShardingConfig):
    """The EBC sharder with FBGEMM's exact (non-row-wise) Adagrad fused into backward."""
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder

    return EmbeddingBagCollectionSharder(fused_params={
        "optimizer": EmbOptimType.EXACT_ADAGRAD, "learning_rate": cfg.lr, "eps": cfg.eps})


def hand_built_plan(model: nn.Module, env: DistEnv, sharding_type: str, sharder):
    """A ShardingPlan giving every table of every EBC the same `sharding_type`; tables go round-robin
    over the ranks for table_wise, every rank holds a slice for the split types."""
    from torchrec.distributed import sharding_plan as sp
    from torchrec.distributed.types import ShardingPlan

    device_type = env.device.type
    ranks = list(range(env.world_size))
    plan, k = {}, 0
    for path, ebc in embedding_collections(model).items():
        per_param = {}
        for cfg in ebc.embedding_bag_configs():
            if sharding_type == "table_wise":
                gen = sp.table_wise(rank=k % env.world_size, compute_kernel="fused")
            elif sharding_type == "row_wise":
                gen = sp.row_wise(compute_kernel="fused")
            elif sharding_type == "column_wise":
                if cfg.embedding_dim % env.world_size:
                    raise RecipeError("ShardingConfig", "sharding_type",
                                      f"column_wise needs embedding_dim {cfg.embedding_dim} divisible by "
                                      f"world size {env.world_size}")
                gen = sp.column_wise(ranks=ranks, compute_kernel="fused")
            elif sharding_type == "table_column_wise":
                gen = sp.column_wise(ranks=[k % env.world_size], compute_kernel="fused")
            else:
                gen = sp.data_parallel()
            per_param[cfg.name] = gen
            k += 1
        plan[path] = sp.construct_module_sharding_plan(
            ebc, per_param_sharding=per_param, local_size=env.world_size, world_size=env.world_size,
            device_type=device_type, sharder=sharder)
    return ShardingPlan(plan)


def replicate_narrow_tables(model: nn.Module, env: DistEnv, plan, sharder) -> None:
    """Make tables whose width is not a multiple of 4 data_parallel (replicated, dense kernel), in place.

    FBGEMM's fused kernel rejects such widths (even on CPU) and the planner does not know; the 1-wide
    first-order tables of LR/FM/DeepFM are the usual case, and replicating them costs little memory.
    """
    from torchrec.distributed import sharding_plan as sp

    for path, ebc in embedding_collections(model).items():
        narrow = {c.name: sp.data_parallel() for c in ebc.embedding_bag_configs() if c.embedding_dim % 4}
        if narrow:
            plan.plan.setdefault(path, {}).update(sp.construct_module_sharding_plan(
                ebc, per_param_sharding=narrow, local_size=env.world_size, world_size=env.world_size,
                device_type=env.device.type, sharder=sharder))


def planner_plan(model: nn.Module, env: DistEnv, sharder):
    """TorchRec's planner, run locally on every rank (it is deterministic, so all ranks agree)."""
    from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology

    planner = EmbeddingShardingPlanner(topology=Topology(world_size=env.world_size,
                                                         compute_device=env.device.type))
    return planner.plan(model, [sharder])


def shard_model(model: nn.Module, env: DistEnv, cfg: ShardingConfig = ShardingConfig()):
    """Wrap `model` in DMP with its tables sharded per `cfg`; returns (dmp_model, plan).

    The dense part is not wrapped in DDP: the trainer reduces its gradients itself
    (`reduce.allreduce_dense_grads`), with the same scaling as the tables' gradients, so that a step is
    exact also when the ranks hold different numbers of real rows (see `ctrnas.distributed.trainer`).
    DMP gives the tables fresh random weights; the model's own weights are copied into the shards after.
    """
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.types import ShardingEnv

    if not embedding_collections(model):
        raise RecipeError("--distributed", "model", "the model has no EmbeddingBagCollection to shard")
    sharder = make_sharder(cfg)
    full = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if env.device.type != "cpu":
        _move_dense(model, env.device)
    plan = (planner_plan(model, env, sharder) if cfg.sharding_type is None
            else hand_built_plan(model, env, cfg.sharding_type, sharder))
    replicate_narrow_tables(model, env, plan, sharder)
    dmp = DistributedModelParallel(model, env=ShardingEnv.from_process_group(dist.group.WORLD),
                                   device=env.device, plan=plan, sharders=[sharder], init_data_parallel=False)
    load_full_state(dmp, full)
    return dmp, plan


def _move_dense(model: nn.Module, device: torch.device) -> None:
    """Move everything except the EBCs to `device` (DMP places the table shards itself; moving the full
    tables first could need more memory than one device has)."""
    tables = {id(m) for ebc in embedding_collections(model).values() for m in ebc.modules()}
    for m in model.modules():
        if id(m) in tables:
            continue
        for p in m._parameters.values():
            if p is not None:
                p.data = p.data.to(device)  # in place: tied parameters stay tied
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = b.to(device)


@torch.no_grad()
def load_full_state(dmp: nn.Module, full: dict[str, torch.Tensor], src: int = 0) -> None:
    """Set a sharded model's weights from an unsharded state_dict (rank `src`'s copy wins everywhere).

    DMP re-initialises the sharded tables instead of keeping the module's weights, so each rank copies
    its slices out of the full tables; the full tensors are broadcast first so that ranks whose model was
    built differently still end up holding one consistent model.
    """
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    from ctrnas.distributed.reduce import comm_device

    for key, target in dmp.state_dict().items():
        if key not in full:
            raise CtrnasError(f"cannot load the sharded model: '{key}' is missing from the unsharded state_dict")
        value = full[key].to(comm_device()).contiguous()
        dist.broadcast(value, src)
        if isinstance(target, ShardedTensor):
            for shard in target.local_shards():
                md = shard.metadata
                shard.tensor.copy_(value[tuple(slice(o, o + n) for o, n in zip(md.shard_offsets, md.shard_sizes))])
        else:
            target.copy_(value)


def sharding_summary(plan) -> dict[str, str]:
    """'module.table' -> sharding type, e.g. for the log and the metrics JSON."""
    out = {}
    for path, module_plan in plan.plan.items():
        for table, ps in module_plan.items():
            out[f"{path}.{table}"] = ps.sharding_type
    return out
