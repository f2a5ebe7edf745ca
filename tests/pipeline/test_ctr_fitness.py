"""CTR fitness: proxy scores equal a direct proxy call on the exported subnet; one-shot scores equal a log
loss computed independently; both survive pickling (scoring workers) with identical results."""

import math
import pickle

import numpy as np
import pytest
import torch

from ctrnas.pipeline.data import load_rows, warmup_rows
from ctrnas.proxies import get_proxy
from ctrnas.pipeline.fitness.ctr_fitness import OneShotFitness, ProxyFitness, bce_loss
from ctrnas.space import get_space
from ctrnas.supernet import export


def test_proxy_fitness_equals_the_proxy_on_the_exported_subnet(fitness_setup, tests_data):
    recipe, supernet, archs = fitness_setup
    rows = load_rows(tests_data, "train", 100, 2 * 128)
    fit = ProxyFitness(supernet, "zico", {}, rows, batch_size=128, num_batches=2, init="inherit")
    batches = [((d, k), y) for d, k, y in rows.batches(128)]
    for arch in archs:
        want = get_proxy("zico", k=2).score(export(supernet, arch), batches, bce_loss).value
        got = fit(arch, seed=5)
        assert got.value == pytest.approx(want, rel=1e-9) and got.terms


@pytest.mark.parametrize("proxy,options", [("sigeo", {"embeddings": True}), ("synflow", {}), ("snip", {})])
def test_inherited_scoring_shares_the_tables_and_leaves_the_supernet_as_it_was(fitness_setup, tests_data, proxy, options):
    recipe, supernet, archs = fitness_setup
    rows = load_rows(tests_data, "train", 100, 2 * 64)
    fit = ProxyFitness(supernet, proxy, options, rows, batch_size=64, num_batches=2, init="inherit")
    assert fit.model(archs[0], 0).stem is supernet.stem  # no per-candidate copy of the tables
    before = {k: v.clone() for k, v in supernet.state_dict().items()}
    batches = [((d, k), y) for d, k, y in rows.batches(64)]

    def on_a_copy(arch):  # the proxy on a standalone export with its own tables, RNG pinned as the fitness does
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(5)
            return fit.proxy.score(export(supernet, arch), batches, bce_loss).value

    for arch in archs + archs[:1]:  # the repeat: nothing of an earlier score leaks into a later one
        assert fit(arch, seed=5).value == pytest.approx(on_a_copy(arch), rel=1e-9)
    after = supernet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in supernet.parameters())


def test_proxy_fitness_pickles_and_scores_identically(fitness_setup, tests_data):
    recipe, supernet, archs = fitness_setup
    rows = load_rows(tests_data, "train", 0, 2 * 64)
    fit = ProxyFitness(supernet, "sigeo", {"preset": "warmup_recsys"}, rows, 64, 2, init="fresh")
    before = fit(archs[0], seed=11)
    clone = pickle.loads(pickle.dumps(fit))
    after = clone(archs[0], seed=11)
    assert math.isfinite(before.value) and after.value == before.value and after.terms == before.terms
    assert fit(archs[0], seed=12).value != before.value  # fresh weights follow the candidate seed


def test_proxy_fitness_rejects_too_few_rows(fitness_setup, tests_data):
    from ctrnas.errors import CtrnasError

    recipe, supernet, _ = fitness_setup
    with pytest.raises(CtrnasError):
        ProxyFitness(supernet, "zico", {}, load_rows(tests_data, "train", 0, 100), 64, 2)


def test_oneshot_fitness_is_the_validation_log_loss_of_inherited_weights(fitness_setup, tests_data):
    recipe, supernet, archs = fitness_setup
    val = load_rows(tests_data, "val", 0, 1000)
    fit = OneShotFitness(supernet, None, val, finetune_steps=0, eval_batch_size=300)
    for arch in archs[:2]:
        model = export(supernet, arch).eval()
        with torch.no_grad():
            d, k, y = val.batch(0, len(val))
            p = torch.sigmoid(model(d, k)).double().numpy()
        yy = y.double().numpy()
        want = -np.mean(yy * np.log(p) + (1 - yy) * np.log(1 - p))
        assert fit(arch, 0).value == pytest.approx(want, rel=1e-6)


def test_oneshot_finetuning_lowers_training_loss_and_leaves_the_supernet_alone(fitness_setup, tests_data):
    recipe, supernet, archs = fitness_setup
    before = {k: v.clone() for k, v in supernet.state_dict().items()}
    flags = [p.requires_grad for p in supernet.parameters()]
    supernet.train()
    train = load_rows(tests_data, "train", warmup_rows(tests_data, 0.05), 2048)
    # evaluating on the fine-tuning rows themselves: fitting only the head must lower their loss
    plain = OneShotFitness(supernet, None, train, finetune_steps=0)
    tuned = OneShotFitness(supernet, train, train, finetune_steps=40, lr=0.05, batch_size=256)
    assert tuned(archs[0], 0).value < plain(archs[0], 0).value
    after = supernet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # the subnets share the supernet's tables: their flags and mode are the supernet's again afterwards
    assert [p.requires_grad for p in supernet.parameters()] == flags
    assert all(m.training for m in supernet.modules())
    clone = pickle.loads(pickle.dumps(tuned))
    assert clone(archs[0], 0).value == tuned(archs[0], 0).value


@pytest.mark.slow
def test_search_with_two_worker_processes_equals_serial(fitness_setup, tests_data):
    """Spawned scoring workers receive the pickled fitness (supernet + rows) and give the serial history."""
    from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution

    recipe, supernet, _ = fitness_setup
    rows = load_rows(tests_data, "train", 0, 2 * 64)
    fit = ProxyFitness(supernet, "sigeo", {}, rows, 64, 2, init="fresh")
    cfg = EvolutionConfig(population_size=4, generations=1, tournament_size=2, children_per_generation=2)
    space = get_space(recipe.space)
    serial = RegularizedEvolution(space, cfg, seed=3).run(fit, workers=1)
    parallel = RegularizedEvolution(space, cfg, seed=3).run(fit, workers=2)
    assert serial.history.same_as(parallel.history)


@pytest.mark.slow
def test_sigeo_sgd_steps_in_workers_leave_the_shared_supernet_alone(fitness_setup, tests_data):
    """`update_lr` steps weights in place: each candidate gets its own tables, so workers (which share the
    supernet's memory) give the serial history and the supernet is unchanged."""
    from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution

    recipe, supernet, archs = fitness_setup
    before = {k: v.clone() for k, v in supernet.state_dict().items()}
    rows = load_rows(tests_data, "train", 0, 2 * 64)
    fit = ProxyFitness(supernet, "sigeo", {"update_lr": 0.5, "embeddings": True}, rows, 64, 2, init="inherit")
    assert fit.proxy.writes_weights and fit.model(archs[0], 0).stem is not supernet.stem
    cfg = EvolutionConfig(population_size=6, generations=1, tournament_size=2, children_per_generation=4)
    space = get_space(recipe.space)
    serial = RegularizedEvolution(space, cfg, seed=3).run(fit, workers=1)
    # two workers share the supernet's memory as any number would: a write to it shows in `after` below
    parallel = RegularizedEvolution(space, cfg, seed=3).run(fit, workers=2)
    assert serial.history.same_as(parallel.history)
    after = supernet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_sigeo_sgd_steps_are_undone_when_a_batch_fails(fitness_setup, tests_data):
    recipe, supernet, archs = fitness_setup
    model = export(supernet, archs[0])
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rows = load_rows(tests_data, "train", 0, 3 * 64)
    batches = [((d, k), y) for d, k, y in rows.batches(64)]
    calls = []

    def failing_loss(logits, labels):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("third batch fails")
        return bce_loss(logits, labels)

    with pytest.raises(RuntimeError, match="third batch"):
        get_proxy("sigeo", k=3, update_lr=0.5).score(model, batches, failing_loss)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
