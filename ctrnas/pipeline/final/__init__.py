"""The final stage (NASRec `eval_best_candidate_top15`): the search's top-k retrained from scratch, one chosen.

  stage      final_stage: the top-k (and the width variants) trained, chosen, exported
  workers    the trainings on an executor (`final.workers` processes, or the recipe's `execution`)
  memory     how many training workers fit in memory
  resume     a folder per training, so an interrupted stage resumes
  selection  judge and rank the trained models (baselines too), write the chosen one
Where the chosen one came from is `ctrnas.pipeline.origin`. One training itself is `ctrnas.pipeline.fitness.scratch` (the short-training rung trains the same way).
"""

from ctrnas.pipeline.final.stage import final_stage, width_variants
from ctrnas.pipeline.final.workers import in_workers, train_job, training_executor

__all__ = ["final_stage", "in_workers", "train_job", "training_executor", "width_variants"]
