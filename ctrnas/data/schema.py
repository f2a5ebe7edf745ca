"""Dataset schema: which columns are the label, dense and sparse features, and table sizes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SparseFeature:
    """One categorical field: ids in the Parquet column lie in [0, cardinality)."""

    name: str
    cardinality: int


@dataclass(frozen=True)
class DatasetSchema:
    """Column layout of a prepared dataset folder (see `ctrnas.data.dataset`)."""

    label: str
    dense: tuple[str, ...]
    sparse: tuple[SparseFeature, ...]

    @property
    def dense_dim(self) -> int:
        return len(self.dense)

    @property
    def sparse_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.sparse)

    @property
    def cardinalities(self) -> tuple[int, ...]:
        return tuple(f.cardinality for f in self.sparse)

    def to_json(self) -> dict:
        return {
            "label": self.label,
            "dense": list(self.dense),
            "sparse": [{"name": f.name, "cardinality": f.cardinality} for f in self.sparse],
        }

    @classmethod
    def from_json(cls, d: dict) -> "DatasetSchema":
        return cls(
            label=d["label"],
            dense=tuple(d["dense"]),
            sparse=tuple(SparseFeature(s["name"], int(s["cardinality"])) for s in d["sparse"]),
        )
