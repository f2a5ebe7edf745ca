"""`ctrnas warmup`: one supernet warmed up by the pipeline's own warm-up stage, so it writes the checkpoint a
run writes (and a run with the same settings reuses it)."""

from __future__ import annotations

from pathlib import Path

from ctrnas.pipeline.inputs import space_spec
from ctrnas.pipeline.results import WarmupResult


def warmup_supernet(data_dir, cfg, space="nasrec-full", fraction: float = 0.01, full_ratio: float = 0.2,
                    out_dir=None, overwrite: bool = False) -> WarmupResult:
    """The pipeline's warm-up stage for one supernet (seeded from `cfg.seed`): it writes the same
    `ctrnas-supernet/1` checkpoint and warmup.json a run writes, and a re-run with the same settings reuses them."""
    from ctrnas.pipeline.data import open_data
    from ctrnas.pipeline.stages import warmup_stage
    from ctrnas.recipe import DataSection, Recipe
    from ctrnas.space import get_space
    from ctrnas.train.config import WarmupConfig

    config = get_space(space_spec(space)).config
    recipe = Recipe(name="warmup", data=DataSection(path=str(data_dir)), seed=cfg.seed, space=config,
                    warmup=WarmupConfig(fraction=fraction, full_supernet_ratio=full_ratio), train=cfg)
    out = Path(out_dir or f"runs/warmup-{config.name}-{fraction:g}-seed{cfg.seed}")
    from ctrnas.data.ownership import warmup_folder
    from ctrnas.locks import folder_lock, reading

    with folder_lock(out, "warmup"), warmup_folder(out, overwrite), reading(data_dir, "warmup"):
        return warmup_stage(recipe, open_data(data_dir), out)
