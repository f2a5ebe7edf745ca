"""What `ctrnas run` may touch in its output folder: the rule of prepared data folders (`ctrnas.data.ownership`).

FOLDER/ctrnas-manifest.json lists the files runs wrote there. A run refuses a folder holding anything else unless
the recipe says `overwrite: true`, and even then never deletes or rewrites it: a file of yours where the run
writes (its report files at the top, anything inside its own subfolders) is refused either way.

While a run writes, its manifest is marked open with the list of the files that were there before it; a run
killed at any point thus leaves a manifest by which everything else in the folder is its own (the folder's
lock kept other writers out meanwhile). At the end the manifest lists what is there, less those files.
A folder written before manifests existed is recognised by its environment.json. The folders other ctrnas verbs
write inside a run's folder (its data folder, compare/, study/) follow their own rules and are not looked into.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ctrnas.data.ownership import OPEN, claimed, is_own_name, walk, writer_inventory  # noqa: F401 (OPEN)
from ctrnas.errors import CtrnasError

RUN_FILES = ("summary.md", "metrics.json", "best_arch.json", "recipe.yaml", "environment.json")
RUN_DIRS = ("warmup", "search", "final", "model", "plots", "data")
OTHER_VERBS = ("compare", "study")  # what `ctrnas compare` / `ctrnas study` write beside a run, with their own rules
FLAG = "--set overwrite=true (in a recipe: overwrite: true)"


def _written_by_a_run(rel: str) -> bool:
    return rel in RUN_FILES or rel.split("/", 1)[0] in RUN_DIRS


def _legacy(folder: Path) -> bool:
    """A run folder from before manifests: its environment.json as ctrnas writes it."""
    from ctrnas.files import read_json

    try:
        env = read_json(folder / "environment.json", "run's environment record")
    except CtrnasError:
        return False
    return isinstance(env, dict) and "versions" in env


def inventory(folder: Path, skip=frozenset()) -> tuple[list[str], list[str]]:
    """(ours, foreign) files under a run folder; subfolders in `skip` (its data folder, which has its own
    manifest) are in neither."""
    skip = set(skip) | {d for d in OTHER_VERBS if (folder / d).is_dir()}
    return writer_inventory(folder, _written_by_a_run, _legacy, skip)


def run_folder(folder: str | Path, overwrite: bool = False, data_dir: str | Path | None = None):
    """Claim a run's output folder (call with its lock held) for the duration of the block."""
    folder = Path(folder)
    skip = set()
    if data_dir is not None:
        rel = os.path.relpath(Path(data_dir).resolve(), folder.resolve())
        if not rel.startswith(".."):
            skip.add(rel)
    skip |= {d for d in OTHER_VERBS if (folder / d).is_dir()}
    return claimed(folder, overwrite, FLAG, _written_by_a_run, _legacy, skip, writer="a run")


# settings that change how a run goes, not what it finds: a re-run may change them freely
_HOW = ("source", "overwrite", "threads", "execution", "search.workers", "final.workers", "train.progress",
        "final.train.progress", "data.prepare.progress")


def check_same_recipe(folder: Path, recipe) -> bool:
    """Refuse to run `recipe` in a folder holding a finished run (its metrics.json) of another recipe: the
    stages would replace that run's warm-up, search and results as stale. The same recipe resumes; with
    `overwrite: true` the other recipe's run is replaced (returns True: the caller drops its search checkpoint,
    which would be refused as another search's). A recipe.yaml that no longer loads (an older ctrnas) is not
    compared."""
    from ctrnas.data.dataset import differences
    from ctrnas.recipe import load_recipe, recipe_settings

    folder = Path(folder)
    if not (folder / "metrics.json").is_file() or not (folder / "recipe.yaml").is_file():
        return False
    try:
        old = recipe_settings(load_recipe(folder / "recipe.yaml"))  # final.train in full, however written
    except (CtrnasError, OSError, ValueError):
        return False

    def what(d: dict) -> dict:
        d = json.loads(json.dumps(d, default=str))
        for key in _HOW:
            *parents, last = key.split(".")
            node = d
            for k in parents:
                node = node.get(k) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(last, None)
        return d

    diff = differences(what(old), what(recipe_settings(recipe)))
    if diff and not recipe.overwrite:
        raise CtrnasError(f"{folder}: holds a finished run of another recipe ({'; '.join(diff[:3])}"
                          f"{' ...' if len(diff) > 3 else ''}); running this one there would replace its results: "
                          f"give another output, or {FLAG} to replace them")
    return bool(diff)


def remove_if_nothing_written(folder: Path) -> None:
    """After a run that created `folder` and failed: remove it when it holds nothing but what every run writes
    first (its lock, manifest, recipe.yaml, environment.json) and empty subfolders, so a run that failed before
    any stage wrote a result leaves no results folder behind."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    entries = walk(folder)
    if not all(is_own_name(f) or f in ("recipe.yaml", "environment.json") for f in entries):
        return
    for f in entries:
        (folder / f).unlink(missing_ok=True)
    for root, _, _ in sorted(os.walk(folder), key=lambda w: -len(Path(w[0]).parts)):  # deepest first
        with contextlib.suppress(OSError):  # only empty folders go
            Path(root).rmdir()
