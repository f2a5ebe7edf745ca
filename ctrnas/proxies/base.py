"""The proxy interface: `score(model, batches, loss_fn) -> ProxyResult`, a registry, and state safety.

Every proxy is a frozen dataclass of its options, registered by name:

    proxy = get_proxy("sigeo", preset="warmup_recsys")
    result = proxy.score(model, batches, loss_fn)   # batches: [(inputs_tuple, target), ...]
    result.value, result.terms, result.meta

The model is called as `model(*inputs)`; `loss_fn(output, target)` must return the batch-mean loss.
Higher `value` is better for every proxy (proxies whose paper minimises a quantity return its negative
and keep the raw quantity in `terms`). Scoring never changes the model: parameters, buffers (BatchNorm
running statistics included), `.grad`, `requires_grad` and train/eval modes are restored afterwards.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Iterator, Sequence

import torch
from torch import nn

from ctrnas.device import same_device
from ctrnas.errors import CtrnasError, RecipeError

Batch = tuple[tuple, torch.Tensor]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ProxyResult:
    """One proxy's score of one model: the value (higher is better), its separate terms, and metadata."""

    value: float
    terms: dict[str, float] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


_REGISTRY: dict[str, type["Proxy"]] = {}


def register(name: str):
    """Class decorator: make a Proxy subclass available as `get_proxy(name)`."""

    def deco(cls):
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise CtrnasError(f"proxy name '{name}' registered twice ({_REGISTRY[name].__name__}, {cls.__name__})")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


@dataclass(frozen=True)
class Proxy:
    """Base class. Subclasses are frozen dataclasses of options and implement `_compute`."""

    name: ClassVar[str] = "?"
    needs_labels: ClassVar[bool] = True
    # "train" follows ZiCo's code (network.train()); proxies that need per-sample independence use "eval".
    default_mode: ClassVar[str] = "train"
    # The option that holds how many batches it reads (e.g. "k"), which a caller sets to the batches it
    # gives; None: it reads every batch it is given.
    batch_option: ClassVar[str | None] = None

    @classmethod
    def warmup_options(cls, options: dict, warmed_up: bool, domain: str = "ctr") -> dict:
        """The options to score with on a supernet that was (`warmed_up`) or was not warmed up, in `domain`
        ("ctr" or "cv"): `options` unchanged, unless a proxy's defaults depend on the warm-up."""
        return options

    @property
    def writes_weights(self) -> bool:
        """True when scoring steps the weights in place (restored afterwards): the model it scores must own
        its tensors, not share them with a supernet other scorers read at the same time."""
        return False

    def score(self, model: nn.Module, batches: Sequence[Batch], loss_fn: LossFn | None = None) -> ProxyResult:
        """Score `model` on `batches`; the model is left exactly as it was found."""
        if len(batches) == 0:
            raise CtrnasError(f"proxy {self.name}: no batches given")
        if self.needs_labels and loss_fn is None:
            raise CtrnasError(f"proxy {self.name}: needs a loss function (it uses labels)")
        same_device(model, batches, f"proxy {self.name}")
        t0 = time.perf_counter()
        with preserved_state(model):
            value, terms, meta = self._compute(model, list(batches), loss_fn)
        meta = dict(meta)
        meta.setdefault("batches", len(batches))
        meta["proxy"] = self.name
        meta["options"] = dataclasses.asdict(self)
        meta["time_s"] = time.perf_counter() - t0
        return ProxyResult(float(value), {k: float(v) for k, v in terms.items()}, meta)

    def _compute(self, model, batches, loss_fn) -> tuple[float, dict, dict]:
        raise NotImplementedError

    def _set_mode(self, model: nn.Module, mode: str | None = None) -> None:
        mode = mode or getattr(self, "mode", None) or self.default_mode
        if mode not in ("train", "eval"):
            raise RecipeError(f"proxy {self.name}", "mode", f"got {mode!r}; expected 'train' or 'eval'")
        model.train(mode == "train")
        # Dropout would make the score depend on the global RNG (docs/proxies.md, A10).
        for m in model.modules():
            if isinstance(m, nn.modules.dropout._DropoutNd):
                m.eval()


# ---------------------------------------------------------------------------------------------------
# State safety
# ---------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def preserved_state(model: nn.Module) -> Iterator[None]:
    """Keep parameters, buffers, grads, requires_grad and train/eval modes as they were.

    Proxies write parameter values in place only when `writes_weights` says so (SiGeo's optional
    `update_lr` steps, restored by the proxy itself; SynFlow uses `functional_call`), so the parameter
    tensors are kept by reference, not cloned: cloning every embedding table on every score
    would dominate the cost. Existing `.grad`s are detached from the parameters on entry (a backward pass
    would accumulate into them in place) and put back on exit. Buffers (BatchNorm running statistics,
    updated in place in train mode) are cloned.
    """
    params = [(p, p.data, p.grad, p.requires_grad) for p in _unique_params(model)]
    for p, *_ in params:
        p.grad = None
    buffers = [(m, bn, b.clone()) for m in model.modules() for bn, b in m._buffers.items() if b is not None]
    modes = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        with torch.no_grad():
            for p, data, grad, req in params:
                p.data = data
                p.grad = grad
                p.requires_grad_(req)
            for m, bn, b in buffers:
                m._buffers[bn] = b
        for m, training in modes:
            m.training = training


def _unique_params(model: nn.Module) -> list[nn.Parameter]:
    seen: set[int] = set()
    out = []
    for m in model.modules():
        for p in m._parameters.values():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


# ---------------------------------------------------------------------------------------------------
# Module / parameter selection (docs/proxies.md, A5 and A6)
# ---------------------------------------------------------------------------------------------------

EMBEDDING_TYPES: tuple[type, ...] = (nn.Embedding, nn.EmbeddingBag)
MODULE_POLICIES = ("ctr", "zico", "all")


def is_embedding(module: nn.Module) -> bool:
    """True for embedding tables (torch's, and TorchRec's, which hold nn.EmbeddingBag/nn.Embedding)."""
    return isinstance(module, EMBEDDING_TYPES)


def select_groups(model: nn.Module, policy: str = "ctr", embeddings: bool = False,
                  trainable_only: bool = True) -> dict[str, list[tuple[str, nn.Parameter]]]:
    """Parameter groups ("modules" of SiGeo Eq. 7) chosen by a policy, keyed by module name.

    - "ctr": each module's own parameters of ndim >= 2 (Linear, Conv, attention projections such as
      `nn.MultiheadAttention.in_proj_weight`, which an isinstance(nn.Linear) filter would miss).
    - "zico": ZiCo's official convention: `.weight` of nn.Conv2d and nn.Linear only.
    - "all": every parameter of each module (biases, norms too).
    Embedding tables are excluded unless `embeddings`; parameters shared by two modules count once.
    """
    if policy not in MODULE_POLICIES:
        raise RecipeError("proxy", "modules", f"got {policy!r}; expected one of {', '.join(MODULE_POLICIES)}")
    seen: set[int] = set()
    groups: dict[str, list[tuple[str, nn.Parameter]]] = {}
    for mname, m in model.named_modules():
        if is_embedding(m) and not embeddings:
            continue
        chosen = []
        for pname, p in m.named_parameters(recurse=False):
            if id(p) in seen or (trainable_only and not p.requires_grad):
                continue
            if policy == "zico":
                ok = isinstance(m, (nn.Conv2d, nn.Linear)) and pname == "weight"
            elif policy == "ctr":
                ok = p.ndim >= 2 or (is_embedding(m) and embeddings)
            else:
                ok = True
            if ok:
                seen.add(id(p))
                chosen.append((f"{mname}.{pname}" if mname else pname, p))
        if chosen:
            groups[mname or "<root>"] = chosen
    return groups


def trainable_params(model: nn.Module, embeddings: bool = True) -> list[tuple[str, nn.Parameter]]:
    """All trainable parameters (each once), optionally without embedding tables."""
    emb = {id(p) for m in model.modules() if is_embedding(m) for p in m.parameters(recurse=False)}
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad and (embeddings or id(p) not in emb)]


# ---------------------------------------------------------------------------------------------------
# Small helpers shared by proxies
# ---------------------------------------------------------------------------------------------------


def forward(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Run the model on one batch's inputs (`model(*inputs)`)."""
    inputs, _ = batch
    return model(*inputs)


def batch_loss(model: nn.Module, batch: Batch, loss_fn: LossFn) -> torch.Tensor:
    """Batch-mean loss of one batch."""
    out = forward(model, batch)
    return loss_fn(out, batch[1])


def dense_grad(g: torch.Tensor) -> torch.Tensor:
    """A row-sparse embedding gradient (tables trained with sparse updates) as a dense tensor."""
    return g.to_dense() if g.is_sparse else g


def grad_or_zero(p: nn.Parameter) -> torch.Tensor:
    return dense_grad(p.grad) if p.grad is not None else torch.zeros_like(p)


@contextlib.contextmanager
def math_attention() -> Iterator[None]:
    """Route scaled_dot_product_attention to its math kernel: the fused CPU kernels implement neither
    double backward (GraSP) nor forward-mode AD (Dextr's curvature)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        yield


def check_choice(proxy: str, key: str, value, choices: Sequence) -> None:
    """Raise RecipeError naming the option when `value` is not one of `choices`."""
    if value not in choices:
        raise RecipeError(f"proxy {proxy}", key, f"got {value!r}; expected one of {', '.join(map(str, choices))}")


def loss_grads(model: nn.Module, batch: Batch, loss_fn: LossFn, params: Sequence[nn.Parameter],
               create_graph: bool = False) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(loss, d loss / d params) for one batch without touching `.grad`; unused parameters get zeros."""
    loss = batch_loss(model, batch, loss_fn)
    gs = torch.autograd.grad(loss, list(params), allow_unused=True, create_graph=create_graph)
    return loss, [torch.zeros_like(p) if g is None else dense_grad(g) for p, g in zip(params, gs)]


def mean_grad_score(model: nn.Module, batches, loss_fn: LossFn, params: list[tuple[str, nn.Parameter]],
                    num_batches: int, score) -> tuple[float, int]:
    """(mean over the first `num_batches` batches of score(params, grads), batches used): the loop of the
    gradient-based per-batch proxies (grad_norm, snip, plain)."""
    scores = []
    for batch in batches[:num_batches]:
        _, gs = loss_grads(model, batch, loss_fn, [p for _, p in params])
        scores.append(score(params, gs))
    return sum(scores) / len(scores), len(scores)


def flat_params(groups: dict[str, list[tuple[str, nn.Parameter]]]) -> list[tuple[str, nn.Parameter]]:
    """The (name, parameter) pairs of all groups, in order."""
    return [np for ps in groups.values() for np in ps]


def batch_count_message(name: str, k: int, given: int) -> str:
    """Why a gradient-variance proxy (ZiCo, SiGeo) cannot score: it needs k >= 2 batches, and k of them."""
    if k < 2:
        return (f"proxy {name}: needs at least 2 batches (it takes the gradient variance over batches), got k={k}: "
                "use `ctrnas score --batches 2` or more, or proxy.batches >= 2 in the recipe")
    return (f"proxy {name}: k={k} batches asked but {given} given: use `ctrnas score --batches {k}` or more, "
            f"or lower the proxy's k (`--set {name}.k={given}`)")
