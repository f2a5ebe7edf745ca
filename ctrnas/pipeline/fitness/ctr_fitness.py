"""Fitness functions for CTR subnets of a NASRec supernet: a zero-cost proxy, or one-shot evaluation.

Both are plain picklable objects holding the (warmed-up) supernet and in-memory rows, so the search's
spawned scoring workers get them through the pool initializer and give results identical to serial
(torch hands the tensors over in shared memory: the workers read one supernet, so scoring must not write it).

- `ProxyFitness`: the subnet (exported with inherited or freshly drawn weights) is scored by a registry
  proxy on a fixed list of k training batches (its budget: a call may use the first b <= k of them).
  The pipeline draws those rows once per search, right after the warm-up rows, so every candidate sees
  the same data and none of it was used to warm up.
- `OneShotFitness` (NASRec `eval_subnet_from_supernet.py`): inherited weights, optionally fine-tune the
  last linear layer only, then the validation log loss (lower is better, so the search minimises); its
  budget is the number of fine-tuning steps.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from ctrnas.search.fitness import FitnessResult
from ctrnas.train.batches import TensorRows


def device_of(model: nn.Module) -> torch.device:
    """Where `model` computes (its first parameter's device; the CPU for a model without parameters)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def default_init(fraction: float | None) -> str:
    """How a candidate gets its weights when the recipe says `proxy.init: auto`: re-drawn from its seed after no
    warm-up (true zero-shot), else the warmed-up supernet's slices."""
    return "fresh" if fraction == 0 else "inherit"


def proxy_options(name: str, options: dict | None, fraction: float | None) -> dict:
    """A proxy's options as the search uses them: those that fit the warm-up (`Proxy.warmup_options`: SiGeo
    without a `preset` gets the one for the warm-up); `fraction` None: warmed up by an unknown amount."""
    from ctrnas.proxies import get_proxy, list_proxies

    options = dict(options or {})
    if name not in list_proxies():
        return options
    return type(get_proxy(name)).warmup_options(options, warmed_up=fraction != 0, domain="ctr")


def bce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The batch-mean binary cross-entropy every CTR proxy and trainer uses."""
    return F.binary_cross_entropy_with_logits(logits.reshape(-1), labels.reshape(-1).float())


class _Cached:
    """Keeps per-process derived objects (KJT batches, the proxy) out of the pickle sent to workers."""

    _volatile: tuple[str, ...] = ()

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in self._volatile:
            state[name] = None
        return state


class ProxyFitness(_Cached):
    """fitness(arch, seed, budget) = proxy score of the exported subnet on the first `budget` of the fixed
    batches (default: all `num_batches`; higher is better)."""

    maximize = True
    _volatile = ("_batches", "_proxy", "_proxies")

    def __init__(self, supernet: nn.Module, proxy: str, options: dict | None, rows: TensorRows, batch_size: int,
                 num_batches: int, init: str = "inherit"):
        if init not in ("inherit", "fresh"):
            raise ValueError(f"init must be 'inherit' or 'fresh', got {init!r}")
        if len(rows) < num_batches * batch_size:
            from ctrnas.errors import CtrnasError

            raise CtrnasError(f"proxy fitness needs {num_batches} x {batch_size} rows after the warm-up rows, "
                              f"only {len(rows)} are left in the training split")
        self.supernet, self.proxy_name, self.options = supernet, proxy, dict(options or {})
        from ctrnas.proxies import get_proxy

        batch_option = type(get_proxy(proxy)).batch_option
        if batch_option is not None:
            self.options.setdefault(batch_option, num_batches)  # a proxy's own batch count follows the recipe's k
        self.rows, self.batch_size, self.num_batches, self.init = rows, batch_size, num_batches, init
        self._batches = self._proxy = self._proxies = None
        self.proxy  # fail early on an unknown proxy or option (RecipeError), not inside a worker

    @property
    def proxy(self):
        if self._proxy is None:
            from ctrnas.proxies import get_proxy

            self._proxy = get_proxy(self.proxy_name, **self.options)
        return self._proxy

    @property
    def default_budget(self) -> int:
        return self.num_batches

    def proxy_for(self, budget: int):
        """The proxy that spends `budget` batches: the configured one at the default budget; otherwise, for
        a proxy with its own batch count `k`, one with k = budget."""
        if budget == self.num_batches:
            return self.proxy
        if not 1 <= budget <= self.num_batches:
            from ctrnas.errors import CtrnasError

            raise CtrnasError(f"proxy fitness: budget {budget} batches is outside [1, {self.num_batches}] "
                              "(proxy.batches sets how many are drawn)")
        from ctrnas.proxies import get_proxy

        if "k" not in {f.name for f in dataclasses.fields(type(self.proxy))}:
            return self.proxy
        if self._proxies is None:
            self._proxies = {}
        if budget not in self._proxies:
            self._proxies[budget] = get_proxy(self.proxy_name, **{**self.options, "k": budget})
        return self._proxies[budget]

    def proxy_batches(self) -> list[tuple[tuple, torch.Tensor]]:
        """The k fixed batches in the proxy format [((dense, kjt), labels), ...]."""
        if self._batches is None:
            self._batches = [((d, k), y) for d, k, y in
                             self.rows.batches(self.batch_size, self.num_batches * self.batch_size,
                                               device_of(self.supernet))]
        return self._batches

    def model(self, arch, seed: int) -> nn.Module:
        """The subnet that is scored: the supernet's slices, or fresh weights from `seed`. Inherited weights
        share the supernet's embedding tables instead of copying them per candidate (full-size tables make
        the copy cost more than the score): proxies leave every parameter as they found it
        (`proxies.base.preserved_state`), except those that step the weights in place (`writes_weights`),
        which get their own copy, since scoring workers may share the supernet's memory."""
        from ctrnas.supernet import export

        copy = self.init == "fresh" or self.proxy.writes_weights
        # on the supernet's device (fresh weights are drawn on the CPU, so every device starts alike)
        return export(self.supernet, arch, init=self.init, seed=seed, copy_stem=copy).to(device_of(self.supernet))

    def proxy_result(self, arch, seed: int, budget: int | None = None):
        """The proxy's full result (value, terms, meta with options and time) for one candidate; `budget`
        proxy batches (default: the fitness's own number)."""
        budget = self.num_batches if budget is None else int(budget)
        proxy = self.proxy_for(budget)
        model = self.model(arch, seed)
        # Stochastic proxies draw from torch's global RNG; pin it to the candidate's seed and give it back.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return proxy.score(model, self.proxy_batches()[:budget], bce_loss)

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        result = self.proxy_result(arch, seed, budget)
        return FitnessResult(result.value, dict(result.terms), {"proxy": self.proxy_name, "init": self.init})


def head_input(model: nn.Module, dense: torch.Tensor, kjt: KeyedJaggedTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the input of an exported model's final linear layer `model.net.head`, the logit terms added outside
    the head: `Arch.first_order`, `Arch.field_fm`, zeros without them) for one batch, without grad."""
    captured = []
    handle = model.net.head.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            logits = model(dense, kjt)
            rest = logits - model.net.head(captured[0]).squeeze(1)
    finally:
        handle.remove()
    return captured[0], rest


class OneShotFitness(_Cached):
    """fitness(arch, seed, budget) = validation log loss of the subnet with inherited weights (lower is
    better), after `budget` Adagrad steps on the last layer only (default `finetune_steps`; NASRec: 500 at
    lr 0.04)."""

    maximize = False

    def __init__(self, supernet: nn.Module, finetune_rows: TensorRows | None, eval_rows: TensorRows,
                 finetune_steps: int = 500, lr: float = 0.04, batch_size: int = 512, eval_batch_size: int = 8192):
        self.supernet, self.finetune_rows, self.eval_rows = supernet, finetune_rows, eval_rows
        self.finetune_steps, self.lr = finetune_steps, lr
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        if finetune_steps > 0 and (finetune_rows is None or len(finetune_rows) == 0):
            from ctrnas.errors import CtrnasError

            raise CtrnasError("one-shot fitness: fine-tuning needs training rows after the warm-up rows")

    @property
    def default_budget(self) -> int:
        return self.finetune_steps

    def finetune(self, model: nn.Module, steps: int | None = None) -> None:
        """Train only `model.net.head` for `steps` (default `finetune_steps`) steps: the frozen body's
        features are computed without a backward pass."""
        steps = self.finetune_steps if steps is None else steps
        head = model.net.head
        opt = torch.optim.Adagrad(head.parameters(), lr=self.lr, eps=1e-2)
        n = len(self.finetune_rows)
        starts = [(s * self.batch_size) % n for s in range(steps)]
        for step, start in enumerate(starts):
            dense, kjt, labels = self.finetune_rows.batch(start, min(start + self.batch_size, n), device_of(head))
            feats, rest = head_input(model, dense, kjt)
            # cosine decay over the fine-tuning steps (NASRec uses a cosine schedule here too)
            for g in opt.param_groups:
                g["lr"] = self.lr * 0.5 * (1 + math.cos(math.pi * step / steps))
            loss = bce_loss(head(feats).squeeze(1) + rest, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> tuple[float, float]:
        from ctrnas.train.metrics import StreamingMetrics

        model.eval()
        m = StreamingMetrics()
        for dense, kjt, labels in self.eval_rows.batches(self.eval_batch_size, device=device_of(model)):
            m.update(model(dense, kjt), labels)
        r = m.result()
        return r.logloss, r.auc

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        from ctrnas.supernet import export

        steps = self.finetune_steps if budget is None else int(budget)
        if steps < 0 or (steps > 0 and (self.finetune_rows is None or len(self.finetune_rows) == 0)):
            from ctrnas.errors import CtrnasError

            raise CtrnasError(f"one-shot fitness: budget {steps} fine-tuning steps needs training rows after "
                              "the warm-up rows (oneshot.finetune_steps > 0 draws them)")

        # The subnet shares the supernet's tables (no per-candidate copy of full-size tables): nothing here
        # writes them, fine-tuning reads the body without grad, and the stem's mode is put back.
        model = export(self.supernet, arch, init="inherit", copy_stem=False).to(device_of(self.supernet))
        for p in model.net.parameters():
            p.requires_grad_(False)
        for p in model.net.head.parameters():
            p.requires_grad_(True)
        training = [(m, m.training) for stem in model.stems() for m in stem.modules()]
        try:
            if steps > 0:
                self.finetune(model, steps)
            logloss, auc = self.evaluate(model)
        finally:
            for m, mode in training:
                m.training = mode
        return FitnessResult(logloss, {"val_logloss": logloss, "val_auc": auc},
                             {"finetune_steps": steps, "eval_rows": len(self.eval_rows)})


class RandomFitness:
    """fitness(arch, seed, budget) = a uniform draw from the candidate's seed (higher is better): a rung that
    promotes at random, to measure what a real first rung contributes, or (`fitness: random`) no scoring at
    all, so random search retrains random archs."""

    maximize = True

    def __call__(self, arch, seed: int, budget: int | None = None) -> FitnessResult:
        import numpy as np

        return FitnessResult(float(np.random.default_rng(seed).random()))
