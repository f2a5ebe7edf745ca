"""The proxies by name. Importing this module imports every built-in proxy module, which registers its class
(`base.register`), so the names below are all known; the package imports it."""

from __future__ import annotations

import dataclasses

from ctrnas.errors import RecipeError
from ctrnas.proxies import base

# Importing each module registers its proxy.
from ctrnas.proxies import (  # noqa: F401
    dextr,
    epe_nas,
    fisher,
    flops,
    grad_norm,
    grasp,
    hnas,
    jacov,
    l2_norm,
    nasi,
    naswot,
    ntk,
    params,
    plain,
    sigeo,
    snip,
    synflow,
    zen,
    zico,
)


def list_proxies() -> list[str]:
    """Names of all registered proxies, sorted."""
    return sorted(base._REGISTRY)


def get_proxy(name: str, **options) -> base.Proxy:
    """A proxy by registered name, with its options validated (unknown option -> RecipeError)."""
    if name not in base._REGISTRY:
        raise RecipeError("proxies", name, f"unknown proxy; expected one of {', '.join(sorted(base._REGISTRY))}")
    cls = base._REGISTRY[name]
    known = {f.name: f.type for f in dataclasses.fields(cls)}
    for key, value in options.items():
        if key not in known:
            raise RecipeError(f"proxy {name}", key, f"unknown option; expected one of {', '.join(sorted(known))}")
        _check_type(name, key, value, known[key])
    return cls(**options)


def _check_type(proxy: str, key: str, value, annotation) -> None:
    """Options are scalars; check them against the field's annotation ("float | None", "int", ...)."""
    allowed = {t.strip() for t in str(annotation).split("|")}
    if value is None:
        ok = "None" in allowed
    elif isinstance(value, bool):
        ok = "bool" in allowed
    elif isinstance(value, int):
        ok = bool({"int", "float"} & allowed)
    elif isinstance(value, float):
        ok = "float" in allowed
    elif isinstance(value, str):
        ok = "str" in allowed
    else:
        ok = False
    if not ok:
        raise RecipeError(f"proxy {proxy}", key, f"got {value!r}; expected {annotation}")
