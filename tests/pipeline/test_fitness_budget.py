"""The CTR fitnesses' budget: a proxy on the first b of its k batches equals the proxy configured for b
batches; one-shot with a budget of n fine-tuning steps equals a one-shot fitness made for n steps."""

import pytest
import torch

from ctrnas.errors import CtrnasError
from ctrnas.pipeline.data import load_rows
from ctrnas.proxies import get_proxy
from ctrnas.pipeline.fitness.ctr_fitness import OneShotFitness, ProxyFitness, bce_loss
from ctrnas.supernet import export


def test_proxy_budget_is_the_number_of_batches(fitness_setup, tests_data):
    _, supernet, archs = fitness_setup
    rows = load_rows(tests_data, "train", 100, 3 * 64)
    fit = ProxyFitness(supernet, "zico", {}, rows, batch_size=64, num_batches=3, init="inherit")
    assert fit.default_budget == 3
    batches = [((d, k), y) for d, k, y in rows.batches(64)]
    for arch in archs:
        want2 = get_proxy("zico", k=2).score(export(supernet, arch), batches[:2], bce_loss).value
        assert fit(arch, 5, 2).value == pytest.approx(want2, rel=1e-9)
        assert fit(arch, 5, 3).value == fit(arch, 5).value  # the default budget is the old call
        assert fit(arch, 5, 2).value != fit(arch, 5).value
    with pytest.raises(CtrnasError, match="budget 4 batches"):
        fit(archs[0], 5, 4)


def test_proxy_without_a_batch_count_scores_the_first_budget_batches(fitness_setup, tests_data):
    _, supernet, archs = fitness_setup
    rows = load_rows(tests_data, "train", 100, 3 * 64)
    fit = ProxyFitness(supernet, "synflow", {}, rows, batch_size=64, num_batches=3, init="fresh")
    model = fit.model(archs[0], 7)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        want = get_proxy("synflow").score(model, fit.proxy_batches()[:1], bce_loss).value
    assert fit(archs[0], 7, 1).value == pytest.approx(want, rel=1e-9)


def test_oneshot_budget_is_the_number_of_finetuning_steps(fitness_setup, tests_data):
    _, supernet, archs = fitness_setup
    train = load_rows(tests_data, "train", 0, 1024)
    val = load_rows(tests_data, "val", 0, 600)
    fit = OneShotFitness(supernet, train, val, finetune_steps=6, lr=0.05, batch_size=128)
    short = OneShotFitness(supernet, train, val, finetune_steps=2, lr=0.05, batch_size=128)
    plain = OneShotFitness(supernet, None, val, finetune_steps=0)
    assert fit.default_budget == 6
    for arch in archs:
        assert fit(arch, 0, 2).value == short(arch, 0).value
        assert fit(arch, 0, 2).meta["finetune_steps"] == 2
        assert fit(arch, 0, 0).value == plain(arch, 0).value
        assert fit(arch, 0).value == fit(arch, 0, 6).value
    with pytest.raises(CtrnasError, match="budget 3 fine-tuning steps"):
        plain(archs[0], 0, 3)
