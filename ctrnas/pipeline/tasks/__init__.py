"""One-off tasks outside a recipe run, one module per verb: `train` (a model trained from scratch), `warmup` (a
supernet warmed up), `export` (one architecture, a `ctrnas train` folder, or a model of a run's front, exported); `ctrnas score` is `ctrnas.pipeline.fitness.scoring`.
They are built from the pipeline's own pieces, so each gives the numbers and files a run gives for the same
settings."""

from ctrnas.pipeline.tasks.export import export_arch, export_pick, export_trained
from ctrnas.pipeline.tasks.train import LAYERNORM, final_recipe, run_recipe, save_trained, train_config, train_model
from ctrnas.pipeline.tasks.warmup import warmup_supernet

__all__ = ["LAYERNORM", "export_arch", "export_pick", "export_trained", "final_recipe", "run_recipe", "save_trained",
           "train_config", "train_model", "warmup_supernet"]
