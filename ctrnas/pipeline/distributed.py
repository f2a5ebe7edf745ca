"""The `--distributed` path of `ctrnas run`: the final stage's trainings sharded over the torchrun ranks.

    torchrun --nproc_per_node 2 -m ctrnas run recipes/synthetic.yaml --distributed [--sharding row_wise]

Rank 0 runs the data, warm-up and search stages exactly as a one-process run does (they are cheap next to
the final stage, and they write the results folder) while the other ranks wait for it; rank 0 then sends
them the prepared-data description and the search history. Every rank runs `final_stage` with the
DistributedTrainer (tables sharded with DMP, each rank on its slice of every global batch, metrics over all
ranks), so the top-k, the chosen best and every metric equal the one-process run's; rank 0 gathers the
best model, exports it and writes the report. The other ranks write nothing.

The wait uses its own gloo group with a long timeout (`WAIT_TIMEOUT_S`), since a search can take hours and
the default group's timeout is kept short so that a failed peer does not hang the training collectives. An
exception on rank 0 before the final stage is sent to the others, which raise it too; a crashed rank is
handled by torchrun (it stops the whole job).
"""

from __future__ import annotations

import contextlib

import dataclasses
import datetime

import torch.distributed as dist

from ctrnas.distributed.dmp import DistEnv, ShardingConfig, init_distributed
from ctrnas.errors import CtrnasError
from ctrnas.recipe import Recipe

WAIT_TIMEOUT_S = 7 * 24 * 3600.0  # how long ranks 1.. wait for rank 0's data, warm-up and search


@dataclasses.dataclass(frozen=True)
class FinalDistributed:
    """What `final_stage` needs to train on N ranks: this rank's place and how the tables are sharded."""

    env: DistEnv
    sharding: ShardingConfig = ShardingConfig()

    def describe(self) -> dict:
        return {"world_size": self.env.world_size, "backend": self.env.backend,
                "sharding": self.sharding.sharding_type or "planner"}


def share_from_main(env: DistEnv, produce, timeout_s: float | None = None):
    """Run `produce()` on rank 0 only and return its value on every rank (pickled over a gloo group that
    waits up to `timeout_s`, default WAIT_TIMEOUT_S). If it raises on rank 0, the other ranks raise a
    CtrnasError naming the error."""
    timeout_s = WAIT_TIMEOUT_S if timeout_s is None else timeout_s
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    try:
        box = [None]
        if env.is_main:
            try:
                value = produce()
            except BaseException as e:
                dist.broadcast_object_list([("error", f"{type(e).__name__}: {e}")], src=0, group=group)
                raise
            box = [("ok", value)]
        dist.broadcast_object_list(box, src=0, group=group)
        kind, value = box[0]
        if kind == "error":
            raise CtrnasError(f"rank 0 failed before the final stage: {value}")
        return value
    finally:
        dist.destroy_process_group(group)


def run_recipe_distributed(recipe: Recipe, sharding: ShardingConfig | None = None, backend: str | None = None,
                           progress: bool = True, echo=print):
    """`ctrnas.pipeline.run.run_recipe` on every rank of a torchrun job; rank 0 returns the RunResult (the
    same numbers as one process), the other ranks None. See the module docstring."""
    from ctrnas.locks import folder_lock
    from ctrnas.pipeline.run_folder import run_folder
    from ctrnas.pipeline.run import StageClock, front_stages, sayer, set_threads

    if recipe.final_train.embedding_update == "dense":  # fail now, not after hours of search
        raise CtrnasError("--distributed trains tables with the fused (sparse) Adagrad; set "
                          "embedding_update: sparse or fused in the final stage's train section")
    set_threads(recipe)
    env = init_distributed(backend)
    main = env.is_main
    say, clock = sayer(recipe, echo if main else None), StageClock()
    progress = progress and main
    front = {}

    from ctrnas.locks import reading

    # rank 0 alone writes the results folder, so it alone holds the folder's lock (until it returns), and
    # the reader's lock on the data folder
    lock = folder_lock(recipe.output_dir, "run --distributed") if main else contextlib.nullcontext()
    claim = run_folder(recipe.output_dir, recipe.overwrite, recipe.data_dir) if main else contextlib.nullcontext()
    reader = reading(recipe.data_dir, "run --distributed") if main else None

    def produce():
        data, warm, search = front_stages(recipe, None, progress, say, clock)
        front.update(warm=warm)
        if reader is not None:
            reader.acquire()  # the data stage may have just made the folder
        return data, search  # small (paths, schema, history); the supernet stays on rank 0

    with lock, claim, reader or contextlib.nullcontext():
        return _distributed_stages(recipe, env, sharding, share_from_main(env, produce), front, clock, say,
                                   progress)


def _distributed_stages(recipe, env, sharding, shared, front, clock, say, progress):
    """The final stage on every rank and rank 0's report, after the front stages (`shared`)."""
    from ctrnas.pipeline.final import final_stage
    from ctrnas.pipeline.run import finish_run

    main = env.is_main
    data, search = shared
    warm = front.get("warm")
    say(f"final stage on {env.world_size} ranks ({env.backend}, sharding: "
        f"{(sharding or ShardingConfig()).sharding_type or 'planner'})")
    dist_final = FinalDistributed(env, sharding or ShardingConfig())
    final = final_stage(recipe, data, search, warm.supernet if main else None,
                        recipe.output_dir if main else None, progress=progress, distributed=dist_final)
    if not main:
        return None
    return finish_run(recipe, data, warm, search, final, clock, say)
