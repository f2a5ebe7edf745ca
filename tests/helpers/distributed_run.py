"""Rank functions for the tests of `ctrnas run --distributed` (module-level: spawned ranks import them by
module name; the launcher is `ctrnas.distributed.launch`)."""

from __future__ import annotations

from pathlib import Path


def run_recipe_ranks(env, recipe_path: str, overrides: list[str], sharding: str | None) -> None:
    """What `torchrun ... ctrnas run RECIPE --distributed` runs on each rank (tests); rank 0 writes the
    results folder, and only rank 0 gets a result."""
    from ctrnas.distributed.dmp import ShardingConfig
    from ctrnas.pipeline.distributed import run_recipe_distributed
    from ctrnas.recipe import load_recipe

    result = run_recipe_distributed(load_recipe(recipe_path, overrides), ShardingConfig(sharding), progress=False,
                                    echo=None)
    assert (result is not None) == env.is_main, f"rank {env.rank} got result {result!r}"


def run_recipe_ranks_recording_errors(env, recipe_path: str, overrides: list[str], err_dir: str,
                                      wait_timeout_s: float) -> None:
    """`run_recipe_ranks`, but each rank writes the error it ends with to `err_dir/rank<r>.txt` and returns
    normally (so that one rank's failure does not stop the others before they report); ranks 1.. wait for
    rank 0 at most `wait_timeout_s`, so a rank left waiting fails the test instead of hanging it."""
    from ctrnas.pipeline import distributed

    distributed.WAIT_TIMEOUT_S = wait_timeout_s
    try:
        run_recipe_ranks(env, recipe_path, overrides, None)
    except Exception as e:  # noqa: BLE001 - recorded for the test to read
        Path(err_dir, f"rank{env.rank}.txt").write_text(f"{type(e).__name__}: {e}")


def train_model_ranks(env, data_dir: str, out_dir: str, sharding: str | None, what: tuple[str, str]) -> None:
    """What `torchrun ... ctrnas train --distributed --baseline B` (what = ("baseline", B)) or `--arch A` runs on
    each rank (tests): rank 0 gets the metrics and writes the model folder."""
    from ctrnas.distributed.testing import toy_config
    from ctrnas.pipeline.tasks import train_model

    cfg = toy_config(batch_size=64, eval_batch_size=256)
    kind, name = what
    metrics, _ = train_model(data_dir, cfg, **{kind: name}, out_dir=out_dir, distributed=True, sharding=sharding)
    assert (metrics is not None) == env.is_main, f"rank {env.rank} got metrics {metrics!r}"


def train_command_then_model_ranks(env, data_dir: str, command_out: str, model_out: str, sharding: str | None,
                                   what: tuple[str, str]) -> None:
    """`train_command_ranks` into `command_out`, then `train_model_ranks` into `model_out`, on the same ranks (the
    tests of both share one spawn: each rank pays seconds importing torchrec)."""
    from ctrnas.distributed.testing import train_command_ranks

    train_command_ranks(env, data_dir, command_out, sharding, what[1])
    train_model_ranks(env, data_dir, model_out, sharding, what)
