"""NASRec architecture encoding and search spaces.

Public API (stable):
  Arch, BlockChoice         immutable arch value: `arch.to_json()` (dict) / `Arch.from_json(dict|str)`,
                            `arch.key()` stable de-dup hash (only choices that shape the network),
                            `arch.live_parts()` / `arch.live_blocks()` (what the output depends on)
  SpaceConfig               frozen dataclass (recipe `space:` mapping); presets in PRESETS
  SearchSpace               `space.sample(rng) -> Arch`, `space.mutate(arch, rng) -> Arch` (exactly one
                            choice changes), `space.validate(arch)` (ArchValidationError names block/field)
  get_space(name | SpaceConfig | mapping) -> SearchSpace    names: 'nasrec-full', 'nasrec-small'
`rng` is always a `numpy.random.Generator`.
"""

from ctrnas.space.arch import Arch, BlockChoice, LiveParts
from ctrnas.space.space import (BINARY_DENSE_OPS, DENSE_OPS, MACRO_FIELDS, MICRO_FIELDS, PRESETS, SPARSE_OPS,
                                SearchSpace, SpaceConfig, get_space)

__all__ = ["Arch", "BlockChoice", "LiveParts", "SpaceConfig", "SearchSpace", "get_space", "PRESETS", "DENSE_OPS", "SPARSE_OPS",
           "BINARY_DENSE_OPS", "MACRO_FIELDS", "MICRO_FIELDS"]
