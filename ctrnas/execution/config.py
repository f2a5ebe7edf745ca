"""The `execution:` section of a recipe: where scoring and training jobs run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ctrnas.errors import RecipeError

BACKENDS = ("serial", "processes", "ray")


@dataclass(frozen=True)
class ExecutionConfig:
    """backend: "serial" (this process), "processes" (spawned local workers) or "ray" (Ray actors);
    None follows the stage's own `workers` (search.workers, final.workers): processes when > 1.
    workers: None keeps the stage's count. address: Ray only; None starts a private local Ray,
    "auto" joins this node's cluster, "ray://host:port" a remote head."""

    backend: Literal["serial", "processes", "ray"] | None = None
    workers: int | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        if self.backend is not None and self.backend not in BACKENDS:
            raise RecipeError("recipe", "execution.backend",
                              f"expected one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.workers is not None and self.workers < 1:
            raise RecipeError("recipe", "execution.workers", f"expected >= 1 or null, got {self.workers}")
        if self.address is not None and self.backend != "ray":
            raise RecipeError("recipe", "execution.address", "only the ray backend takes an address")

    def resolve(self, stage_workers: int = 1) -> tuple[str, int]:
        """(backend, workers) for a stage whose own setting is `stage_workers`."""
        workers = self.workers if self.workers is not None else int(stage_workers)
        if self.backend is not None:
            return self.backend, (1 if self.backend == "serial" else workers)
        return ("processes", workers) if workers > 1 else ("serial", 1)
