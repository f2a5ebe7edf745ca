"""The per-sample / batch-mean FR norms against independent computations (one backward per sample; the library SiGeo)."""

import math

import pytest
import torch
import torch.nn.functional as F

from ctrnas.vision.fisher import fr_norms, per_sample_dots
from ctrnas.vision.network import build_network

CELL = "|nor_conv_3x3~0|+|skip_connect~0|avg_pool_3x3~1|+|nor_conv_1x1~0|none~1|skip_connect~2|"


def _net_and_batches(seed=0, n=6, k=2):
    torch.manual_seed(seed)
    net = build_network(CELL, 10, seed=seed, channels=4, cells_per_stage=1).double()
    g = torch.Generator().manual_seed(seed)
    batches = [((torch.randn(n, 3, 8, 8, generator=g, dtype=torch.float64),), torch.randint(0, 10, (n,), generator=g))
               for _ in range(k)]
    return net, batches


def _loop_dots(net, x, y):
    # Independent: backward of each sample's loss (BN in train mode: the loss of sample n computed in its batch).
    params = [p for p in net.parameters() if p.requires_grad]
    state = {k: v.clone() for k, v in net.state_dict().items()}
    out = []
    for i in range(len(y)):
        losses = F.cross_entropy(net(x), y, reduction="none")
        grads = torch.autograd.grad(losses[i], params, allow_unused=True)
        out.append(sum(float((p.detach() * g).sum()) for p, g in zip(params, grads) if g is not None))
        net.load_state_dict(state)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_per_sample_dots_equal_one_backward_per_sample(mode):
    net, batches = _net_and_batches()
    getattr(net, mode)()
    (x,), y = batches[0]
    before = {k: v.clone() for k, v in net.state_dict().items()}
    d = per_sample_dots(net, x, y)
    for k, v in net.state_dict().items():  # BN running statistics untouched
        assert torch.equal(v, before[k]), k
    assert torch.allclose(d, _loop_dots(net, x, y), rtol=1e-8, atol=1e-12)


def test_fr_norms_batch_reading_is_the_library_sigeo_fr_and_sample_reading_is_the_mean_square():
    from ctrnas.proxies import get_proxy

    net, batches = _net_and_batches(k=4)
    net.train()
    fr = fr_norms(net, batches)
    dots = [_loop_dots(net, b[0][0], b[1]) for b in batches]
    alld = torch.cat(dots)
    assert fr["fr_sample_raw"] == pytest.approx(float(alld.square().mean()), rel=1e-8)
    assert fr["fr_batch_raw"] == pytest.approx(float(torch.stack([d.mean() for d in dots]).square().mean()), rel=1e-8)
    assert fr["fr_sample"] == pytest.approx(math.log(fr["fr_sample_raw"]))
    assert fr["fr_sample_raw"] >= fr["fr_batch_raw"]  # Jensen: mean of squares >= square of the means
    sig = get_proxy("sigeo", preset="warmup_cv", modules="zico").score(net, batches, F.cross_entropy)
    assert fr["fr_batch_raw"] == pytest.approx(sig.terms["fr_raw"], rel=1e-6)
