"""NASRec architecture encoding and search spaces.

Public API (stable):
  Arch, BlockChoice         immutable arch value: `arch.to_json()` (dict) / `Arch.from_json(dict|str)`,
                            `arch.key()` stable de-dup hash (only choices that shape the network),
                            `arch.live_parts()` / `arch.live_blocks()` (what the output depends on)
  SpaceConfig               frozen dataclass (recipe `space:` mapping); presets in PRESETS
  SearchSpace               `space.sample(rng) -> Arch`, `space.mutate(arch, rng) -> Arch` (exactly one
                            choice changes), `space.validate(arch)` (ArchValidationError names block/field)
  get_space(name | SpaceConfig | mapping) -> SearchSpace    names: see PRESETS
  OPS, op_spec(name)        the op table (ctrnas.space.ops): the one place an op is declared
  edit_distance(src, dst)   the fewest `mutate` steps from `src` to `dst`'s network
`rng` is always a `numpy.random.Generator`.
"""

from ctrnas.space.arch import Arch, BlockChoice, LiveParts
from ctrnas.space.ops import OPS, OpSpec, dense_reads_sparse, is_binary, op_spec, ops_of_kind, reads_raw
from ctrnas.space.config import MACRO_FIELDS, MICRO_FIELDS, PRESETS, SpaceConfig
from ctrnas.space.space import SearchSpace, get_space
from ctrnas.space.distance import edit_distance

__all__ = ["Arch", "BlockChoice", "LiveParts", "SpaceConfig", "SearchSpace", "get_space", "PRESETS", "OPS", "OpSpec",
           "op_spec", "ops_of_kind", "is_binary", "dense_reads_sparse", "reads_raw", "MACRO_FIELDS", "MICRO_FIELDS",
           "edit_distance"]
