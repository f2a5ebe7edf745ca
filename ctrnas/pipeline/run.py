"""One whole run: data -> warm-up -> search -> final -> report, with wall time per stage.

`run_recipe` is the one-process run. Under torchrun, `ctrnas.pipeline.distributed.run_recipe_distributed`
runs the same pieces (`front_stages`, `final_stage`, `finish_run`) with the final stage's trainings
sharded over the ranks.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from ctrnas.pipeline.data import prepare_data
from ctrnas.pipeline.final import final_stage
from ctrnas.pipeline.fitness.rungs import inside_warmup
from ctrnas.pipeline.report import probe_line, twins_text, write_environment, write_report
from ctrnas.pipeline.results import DataResult, FinalResult, RunResult, SearchStageResult, WarmupResult
from ctrnas.pipeline.stages import search_stage, warmup_stage
from ctrnas.recipe import Recipe

log = logging.getLogger("ctrnas.pipeline")


def cpu_time() -> float:
    """CPU seconds of this process plus its finished child processes and workers (worker pools are stopped
    at the end of the stage that starts them, so a stage's workers count in that stage)."""
    from ctrnas.execution.processes import worker_cpu_seconds

    try:
        import resource
    except ImportError:  # not on Unix: this process only
        return time.process_time() + worker_cpu_seconds()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime + worker_cpu_seconds()


class StageClock:
    """Wall seconds per stage (as the stages report them) and CPU seconds per stage of this process and the
    worker processes it has joined: on a shared machine wall time says more about the neighbours."""

    def __init__(self):
        self.timings: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._c0 = self._c_all = cpu_time()
        self._t_all = time.perf_counter()

    def lap(self, stage: str, wall: float) -> None:
        self.timings[stage] = wall
        now = cpu_time()
        self.cpu[stage], self._c0 = now - self._c0, now

    def total(self) -> None:
        self.timings["total"] = time.perf_counter() - self._t_all
        self.cpu["total"] = cpu_time() - self._c_all


def sayer(recipe: Recipe, echo):
    def say(text: str) -> None:
        if echo is not None:
            echo(f"[{recipe.name}] {text}")

    return say


def set_threads(recipe: Recipe) -> None:
    if recipe.threads is not None:
        import torch

        torch.set_num_threads(recipe.threads)


def front_stages(recipe: Recipe, data: DataResult | None, progress: bool, say,
                 clock: StageClock) -> tuple[DataResult, WarmupResult, SearchStageResult]:
    """Data, warm-up and search into `recipe.output_dir` (reused / resumed when already there)."""
    out = recipe.output_dir
    out.mkdir(parents=True, exist_ok=True)
    write_environment(out, recipe)
    if data is None:
        say(f"data: {recipe.data_dir}")
        data = prepare_data(recipe)
    clock.lap("data", data.seconds)
    rows = {s: v.get("rows") for s, v in data.meta["splits"].items()}
    say(f"data ready ({'reused' if data.reused else 'made'} in {data.seconds:.1f} s): {rows}")

    warm = warmup_stage(recipe, data, out / "warmup")
    clock.lap("warmup", warm.seconds)
    say(f"warm-up {warm.fraction:g}: {warm.steps} steps on {warm.rows} rows in {warm.seconds:.1f} s")

    for line in inside_warmup(recipe, data):
        say(line)
    search = search_stage(recipe, data, warm, out / "search", progress=progress,
                          on_probe=lambda fields: say(probe_line(fields)))
    clock.lap("search", search.seconds)
    best = search.result.best
    say(f"search ({search.fitness_name}): {len(search.history)} evaluations in {search.seconds:.1f} s; "
        f"best fitness {best.value if best else float('nan'):.5g}")
    return data, warm, search


def finish_run(recipe: Recipe, data: DataResult, warm: WarmupResult, search: SearchStageResult,
               final: FinalResult, clock: StageClock, say) -> RunResult:
    """The report folder of a finished run."""
    from ctrnas.pipeline.budget import fte_by_stage, fte_line

    out = recipe.output_dir
    clock.lap("final", final.seconds)
    clock.total()
    compute = fte_by_stage(recipe, data, warm, search, final)
    metrics = write_report(out, recipe, {"data": data, "warm": warm, "search": search, "final": final,
                                         "timings": clock.timings, "cpu": clock.cpu, "compute": compute})
    if final.origin:  # what won and where it came from, before any number
        say(f"result: {final.origin['line']}")
    say(fte_line(compute) + f"; wall {clock.timings['total']:.0f} s")
    if final.fallback:
        say(f"fallback: {final.fallback}")
    if final.twins:
        say(f"trained once, as its baseline: {twins_text(final.twins)}")
    what = f"reported baseline {final.best.label}" if final.fallback else "best by validation"
    # the baselines' test log loss on the same line, so the console says whether the search beat them
    versus = ", ".join(f"{b.label} {b.test.get('logloss', float('nan')):.5f}" for b in final.baselines)
    say(f"{what}: test log loss {final.best.test.get('logloss', float('nan')):.5f}"
        + (f" (baselines: {versus})" if versus else "")
        + f", AUC {final.best.test.get('auc', float('nan')):.5f}; report: {Path(out) / 'summary.md'}")
    return RunResult(out, data, warm, search, final, clock.timings, metrics)


def run_recipe(recipe: Recipe, data: DataResult | None = None, progress: bool = True,
               echo=print) -> RunResult:
    """Run every stage of `recipe` into its output folder; `data` skips the data stage (compare shares it).

    A re-run of the same recipe reuses the prepared data and the warmed-up supernet and resumes the search
    from its last generation checkpoint.
    """
    from ctrnas.locks import folder_lock, reading
    from ctrnas.pipeline.run_folder import check_same_recipe, remove_if_nothing_written, run_folder

    set_threads(recipe)
    say, clock = sayer(recipe, echo), StageClock()
    created = not recipe.output_dir.exists()
    try:
        # one writer per results folder, which touches only what ctrnas wrote there; a reader of the data
        # folder (no `prepare` replaces it while the run reads it)
        with folder_lock(recipe.output_dir, "run"):
            replacing = check_same_recipe(recipe.output_dir, recipe)
            with run_folder(recipe.output_dir, recipe.overwrite, recipe.data_dir), \
                    reading(recipe.data_dir, "run") as reader:
                if replacing:  # another recipe's finished run, with overwrite: its search does not resume
                    (recipe.output_dir / "search" / "search.ckpt").unlink(missing_ok=True)
                data, warm, search = front_stages(recipe, data, progress, say, clock)
                reader.acquire()  # the data stage may have just made the folder
                final = final_stage(recipe, data, search, warm.supernet, recipe.output_dir, progress=progress)
                return finish_run(recipe, data, warm, search, final, clock, say)
    except BaseException:
        if created:  # a run that failed before writing anything leaves no empty runs/<name>/ behind
            remove_if_nothing_written(recipe.output_dir)
        raise
