"""Resuming an interrupted final stage: each training of the final stage has its own folder in the run,
RUN/final/train/<job>/, holding the trainer's checkpoint (written at every epoch end, atomically) and, once the
training and its evaluation are done, result.json with its metrics.

A re-run skips the jobs with a result and resumes the others from their checkpoint; the trainer replays the
same batches from the checkpointed step, so every number equals an uninterrupted run's. A job whose settings
changed (recipe, data, arch) starts over. To bound the disk used (a checkpoint holds the embedding tables and
their optimizer state), a finished job keeps its checkpoint only while its weights may still be exported: the
best candidate so far, and the baselines when no candidate is usable; with `search.evolution.objective: front`
every one (`ctrnas export --pick` exports any model of the front).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from ctrnas.config import to_dict
from ctrnas.data.dataset import atomic_write_text
from ctrnas.errors import CtrnasError
from ctrnas.space.config import space_record
from ctrnas.train.checkpoint import FILE as CHECKPOINT_FILE
from ctrnas.train.metrics import strict_json

TRAIN_DIR = Path("final") / "train"
CHECKPOINT, RESULT, JOB = CHECKPOINT_FILE, "result.json", "job.json"  # the first is the trainer's own


def fingerprint(recipe, data) -> dict:
    """What a final-stage training's numbers depend on besides its job: settings, space and data."""
    from ctrnas.train.config import numeric_settings

    final = to_dict(recipe.final)
    # where and how many at once, and which extra widths are tried, not what one job trains
    for key in ("workers", "memory_limit_gb", "emb_dims", "choose_from"):
        final.pop(key, None)
    if final.get("dense_init") == "nasrec":  # the only init before the key existed: older folders stay valid
        final.pop("dense_init")
    final["train"] = numeric_settings(recipe.final_train)
    splits = {s: {k: v.get(k) for k in ("rows", "ctr")} for s, v in data.meta["splits"].items()}
    source = {k: data.meta.get(k) for k in ("source", "settings", "transforms")}
    return json.loads(json.dumps({"final": final, "space": space_record(recipe.space), "data": splits, **source,
                                  "embedding_dim": recipe.train.embedding_dim}, default=str))


class Job:
    """The folder of one final-stage training (`what` is ("arch", Arch) or ("baseline", name))."""

    def __init__(self, out_dir: Path, label: str, what: tuple, fp: dict):
        kind, x = what
        name = f"{label.replace(' ', '')}-{x.key()}" if kind == "arch" else f"baseline-{x}"
        self.dir, self.label = Path(out_dir) / TRAIN_DIR / name, label
        self.spec = {"job": name, "what": x.to_json() if kind == "arch" else x, **fp}
        if kind == "arch" and x.emb_dim is not None:  # the arch's own width, not the run's
            self.spec["embedding_dim"] = x.emb_dim
        self._checked = False
        self.keep = False  # every finished job keeps its weights (a front: `ctrnas export --pick` may want any)

    def check(self) -> None:
        """Drop what an earlier run with other settings left here; record this job's settings."""
        if self._checked:
            return
        self._checked = True
        try:
            old = json.loads((self.dir / JOB).read_text())
        except (OSError, ValueError):
            old = None
        if old != self.spec:
            for f in (RESULT, CHECKPOINT):
                (self.dir / f).unlink(missing_ok=True)
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.dir / JOB, json.dumps(self.spec, indent=1))

    def result(self) -> dict | None:
        """The stored {val, test, seconds, diverged, dense_params} of a finished training, or None."""
        self.check()
        try:
            done = json.loads((self.dir / RESULT).read_text())
        except (OSError, ValueError):
            return None
        for split in ("val", "test"):  # strict JSON wrote a missing number (NaN) as null: back to NaN
            done[split] = {k: math.nan if v is None and k != "reason" else v for k, v in done[split].items()}
        return done

    def has_checkpoint(self) -> bool:
        return (self.dir / CHECKPOINT).exists()

    def finish(self, result: dict) -> None:
        atomic_write_text(self.dir / RESULT, strict_json(result, indent=1))

    def need_checkpoint(self) -> None:
        if not self.has_checkpoint():
            raise CtrnasError(f"{self.dir}: the weights of this finished training are gone; delete the folder "
                              "to train it again")

    def continue_from(self, path: Path) -> int | None:
        """Start from `path`, the checkpoint of this same training made by the search's prefix rungs (same
        model, seed, batches and settings: the trainer checks them), when the job has neither a result nor a
        checkpoint of its own; returns the step it continues from (None: nothing to continue)."""
        import os
        import shutil

        if not Path(path).is_file() or self.result() is not None or self.has_checkpoint():
            return None
        tmp = self.dir / (CHECKPOINT + ".tmp")
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)  # the trainer replaces its checkpoint atomically: the search's file stays as is
        except OSError:
            shutil.copyfile(path, tmp)
        os.replace(tmp, self.dir / CHECKPOINT)
        return self.checkpoint_step()

    def drop_checkpoint(self) -> None:
        """Its weights are no longer needed (it is finished and will not be exported), unless `keep`."""
        if not self.keep:
            (self.dir / CHECKPOINT).unlink(missing_ok=True)

    def checkpoint_step(self) -> int | None:
        """The step of an unfinished training's checkpoint (read lazily: the tables are not loaded)."""
        from ctrnas.safeload import load_weights_file

        if not self.has_checkpoint():
            return None
        try:
            return int(load_weights_file(self.dir / CHECKPOINT, "checkpoint", mmap=True)["step"])
        except Exception:  # unreadable: the trainer will say so when it loads it
            return None


def jobs_for(recipe, data, out_dir, labelled: list[tuple[str, tuple]]) -> list[Job] | list[None]:
    """A Job per (label, what), or Nones when the stage has no folder to resume from."""
    if out_dir is None:
        return [None] * len(labelled)
    fp = fingerprint(recipe, data)
    jobs = [Job(out_dir, label, what, fp) for label, what in labelled]
    for job in jobs:  # a front's models may each be exported later (`ctrnas export --pick`)
        job.keep = recipe.search.evolution.objective == "front"
    return jobs


def say_resumed(jobs, steps_per_epoch: int, epochs: int) -> None:
    """One line on what an interrupted final stage had done, if anything."""
    done, partial = [], []
    for job in jobs:
        if job is None:
            continue
        if job.result() is not None:
            done.append(job.label)
        elif (step := job.checkpoint_step()) is not None:
            epoch = min(step // max(steps_per_epoch, 1) + 1, epochs)
            partial.append(f"{job.label} at epoch {epoch} of {epochs} (step {step})")
    if done or partial:
        parts = ([f"{', '.join(done)} done (not retrained)"] if done else []) + \
                ([f"resuming {', '.join(partial)}"] if partial else [])
        print(f"final stage: resumed: {'; '.join(parts)}", file=sys.stderr)


def drop(job: Job | None) -> None:
    """Drop the checkpoint of a finished training whose weights will not be exported."""
    if job is not None:
        job.drop_checkpoint()
