"""Hand-designed CTR models as points of the ctrnas spaces: arch files shipped in `ctrnas/space/archs/`.

`dlrm-like` is DLRM (bottom MLP 64-16, DLRM's interaction, top MLP 256-128) and `dcnv2-like` DCN-v2's
parallel form (3 full-rank cross layers over the raw inputs, unprojected, beside a 400-400 deep tower; the
head reads both through `concat`). Exported with LayerNorms off, as the final stage trains them, each has
exactly the parameters of its baseline module (`ctrnas.train.baselines.DLRM` / `DCNv2`) and, on the same
weights, the same output. `dcnv2-stacked` is DCN-v2's stacked form (the cross output feeds the deep
tower), n = dense features + fields x E parameters fewer. `deepfm-like` is the closest point to DeepFM:
a 400-400-400 deep tower over the dense features and the embeddings flattened, and in its last layer an FM
term (`fm: true`: Rendle's second-order sum over 32 EFC tokens, ReLU(a linear map over the raw embeddings),
projected to the tower's width) added before the head, so the logit is deep part + FM part as in DeepFM. It
has no first-order (LR) part, which the space does not hold, and its FM reads mixed tokens, not the fields.
`deepfm-terms-like` is DeepFM itself in a space with FM's logit terms as choices (`ctrnas-small-fm`, or
`first_order` / `field_fm: [false, true]`): deepfm-like's tower, the first-order term and the FM over the
fields' embeddings, and no FM block (on kdd2012-crosses deepfm-like is 0.0047 behind DeepFM, this one level;
docs/results.md). `xdeepfm-like` is xDeepFM (`ctrnas-small-cin`): the first-order
term, a 400-400 deep tower over the dense features and the embeddings flattened, and beside it a CIN of 2 x 16
maps over the embeddings and the dense features as one more token (xDeepFM's CIN reads the fields only),
its pooled maps projected to 16 before the head. The others fit `ctrnas-small` and `ctrnas-full`;
`BASELINE_ARCHS` start a search's population unless a recipe lists others (`search.seeds`: shipped names
or arch files, e.g. an earlier run's best_arch.json).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctrnas.errors import ArchValidationError, CtrnasError
from ctrnas.space.arch import Arch

if TYPE_CHECKING:
    from ctrnas.space.space import SearchSpace

ARCH_DIR = Path(__file__).with_name("archs")
BASELINE_ARCHS = ("dlrm-like", "dcnv2-like")  # the seeded population: what a user would build by hand
SHIPPED_ARCHS = BASELINE_ARCHS + ("dcnv2-stacked", "deepfm-like", "deepfm-terms-like", "xdeepfm-like")


def baseline_arch(name: str) -> Arch:
    """The shipped arch `name` (one of SHIPPED_ARCHS)."""
    if name not in SHIPPED_ARCHS:
        raise CtrnasError(f"unknown architecture name {name!r} (shipped: {', '.join(SHIPPED_ARCHS)})")
    return Arch.from_json((ARCH_DIR / f"{name}.json").read_text())


HOME_SPACES = ("ctrnas-small", "ctrnas-full", "ctrnas-small-fm",
               "ctrnas-small-cin")  # the presets the shipped archs fit, in order


def home_space(name: str) -> str:
    """The smallest preset space that shipped arch `name` fits (`ctrnas train --arch dcnv2-like` without --space)."""
    from ctrnas.space import get_space

    arch = baseline_arch(name)
    for space in HOME_SPACES:
        try:
            get_space(space).validate(arch)
        except ArchValidationError:
            continue
        return space
    raise CtrnasError(f"{name}: fits none of the spaces {', '.join(HOME_SPACES)}; give --space")


def load_arch(spec: str | Path) -> Arch:
    """A shipped arch by name (`dcnv2-like`) or an arch JSON file by path."""
    if str(spec) in SHIPPED_ARCHS:
        return baseline_arch(str(spec))
    try:
        text = Path(spec).read_text()
    except OSError as e:
        raise CtrnasError(f"{spec}: cannot read architecture ({e.strerror}); shipped names: "
                          f"{', '.join(SHIPPED_ARCHS)}") from None
    try:
        return Arch.from_json(text)
    except ArchValidationError as e:
        raise CtrnasError(f"{spec}: {e}") from None


def initial_population(space: SearchSpace, names: tuple[str, ...] = BASELINE_ARCHS) -> list[Arch]:
    """The archs of `names` that fit `space` (a SearchSpace), in `names` order, to seed a search's population.
    A name is a shipped arch or an arch JSON file (`load_arch`).

    A shipped arch that does not fit (e.g. a 3-block space, or one without the Cross op) is left out and the
    caller fills the rest of the population by sampling; a file that does not fit is an error, since the user
    named that model on purpose.
    """
    out = []
    for name in names:
        arch = load_arch(name)
        try:
            space.validate(arch)
        except ArchValidationError as e:
            if name in SHIPPED_ARCHS:
                continue
            raise CtrnasError(f"search seed {name}: does not fit the search space: {e}") from None
        out.append(arch)
    return out
