"""What a one-off task reads from the command line: an architecture file (or a shipped name) checked against a
space, and a space given as a preset name, a YAML file or a run's recipe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ctrnas.errors import ArchValidationError, CtrnasError


RECIPE_KEYS = ("extends", "data", "space", "search", "final", "warmup")  # keys a recipe has and a space has not


def space_spec(value):
    """A space given on the command line: a preset name, a YAML file of SpaceConfig fields, or a recipe (such as
    the `recipe.yaml` a run writes in its folder), whose resolved `space` is taken."""
    from ctrnas.config import load_yaml

    if not (str(value).endswith((".yaml", ".yml")) or Path(value).is_file()):
        return value
    data = load_yaml(value)
    if isinstance(data, dict) and any(k in data for k in RECIPE_KEYS):
        from ctrnas.recipe import load_recipe

        return load_recipe(value).space
    return data


def read_json(path: str | Path, what: str):
    """A JSON file given as input (ctrnas.safeload.read_json: a regular file, a size limit, one-line errors)."""
    from ctrnas.safeload import read_json as read

    return read(path, what)


def read_arch(path: str | Path, space=None):
    """The architecture at `path`, a JSON file or a shipped name (`dcnv2-like`, see `ctrnas.space.baselines`),
    checked against `space` when given; errors name the file."""
    from ctrnas.space import Arch
    from ctrnas.space.baselines import SHIPPED_ARCHS, baseline_arch

    if str(path) in SHIPPED_ARCHS and not Path(path).exists():
        arch = baseline_arch(str(path))
    else:
        data = read_json(path, "architecture")
        if not isinstance(data, dict):
            raise CtrnasError(f"{path}: architecture: expected a JSON object, got {type(data).__name__}")
        try:
            arch = Arch.from_json(data)
        except ArchValidationError as e:
            raise CtrnasError(f"{path}: {e}") from None
    if space is not None:
        check_arch(path, arch, space)
    return arch


def check_arch(path, arch, space) -> None:
    """`space.validate(arch)` with the error naming the architecture file (and, for an arch from a run's
    folder, the run's recipe to pass as its space)."""
    try:
        space.validate(arch)
    except ArchValidationError as e:
        raise CtrnasError(f"{path}: {e}{_run_space_hint(path, space)}") from None


def _run_space_hint(arch_path, space) -> str:
    """For an arch file beside a run's recipe.yaml that was checked against another space: how to name it."""
    from ctrnas.space.baselines import SHIPPED_ARCHS

    if str(arch_path) in SHIPPED_ARCHS and not Path(arch_path).exists():
        return " (the shipped archs fit the ctrnas-small and ctrnas-full spaces)"
    recipe = Path(arch_path).with_name("recipe.yaml")
    if not (Path(arch_path).is_file() and recipe.is_file()):
        return ""
    from ctrnas.space import get_space

    try:
        theirs = get_space(space_spec(recipe)).config
    except CtrnasError:
        return ""
    if dataclasses.replace(theirs, layernorm=False) == dataclasses.replace(space.config, layernorm=False):
        return ""
    return f" (the run that wrote it searched another space: pass --space {recipe})"
