"""Correlation harness: sampling, resumable CSV, warm-up, summaries (with cheap proxies and tiny nets)."""

import json

import pytest
import torch
import torch.nn.functional as F

from ctrnas.vision.correlate import (
    CorrelateConfig, format_markdown, read_rows, run_correlation, sample_cells, summarize, warmup_positions,
)
from ctrnas.vision.network import build_network, count_parameters
from ctrnas.vision.space import TRUTH_COLUMNS, NB201Table, enumerate_cells
from ctrnas.vision.warmup import WarmupConfig, warm_up, warmup_steps


@pytest.fixture(scope="module")
def param_table():
    """A stand-in table whose 'accuracy' is an increasing function of the parameter count (computed
    independently from the op counts: per cell 6 edges, conv3x3 = 9c^2+2c, conv1x1 = c^2+2c)."""
    rows = {}
    for cell in enumerate_cells():
        n3, n1 = cell.ops.count("nor_conv_3x3"), cell.ops.count("nor_conv_1x1")
        params = 73_306 + 5 * sum(n3 * (9 * c * c + 2 * c) + n1 * (c * c + 2 * c) for c in (16, 32, 64))
        rows[cell.to_str()] = {TRUTH_COLUMNS["cifar10"]: 50 + params / 1e5}
    return NB201Table("stand-in", rows)


def _images(n=16):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 3, 32, 32, generator=g), torch.randint(0, 10, (n,), generator=g)


def test_sampling_is_a_seeded_prefix_and_warmup_positions_spread():
    a, b = sample_cells(5, 3), sample_cells(9, 3)
    assert a == b[:5] and len({c.to_str() for c in b}) == 9
    assert sample_cells(5, 4) != a
    pos = warmup_positions(300, 100)
    assert len(pos) == 100 and 0 in pos and max(pos) == 297
    assert warmup_positions(10, None) == set(range(10))


def test_params_proxy_correlates_perfectly_with_a_param_truth_and_run_resumes(tmp_path, param_table):
    x, y = _images()
    csv = tmp_path / "scores.csv"
    cfg = CorrelateConfig(archs=6, proxies=("params",), batch_size=4, k=2, seed=0)
    run_correlation(cfg, x, y, param_table, csv, progress=False)
    first = read_rows(csv)
    assert len(first) == 6
    cell = sample_cells(6, 0)[2]
    row = next(r for r in first if r["arch"] == cell.to_str())
    assert float(row["value"]) == count_parameters(build_network(cell))
    # extending the run scores only the new cells, keeping the old rows
    run_correlation(CorrelateConfig(archs=12, proxies=("params",), batch_size=4, k=2, seed=0), x, y, param_table, csv,
                    progress=False)
    rows = read_rows(csv)
    assert len(rows) == 12 and rows[:6] == first
    assert len({r["arch"] for r in rows}) == 12
    (s,) = summarize(rows, param_table, ["params"], [0.0], n_boot=50)
    assert s.corr.n == 12 and s.corr.spearman == pytest.approx(1.0) and s.corr.kendall == pytest.approx(1.0)
    assert "| params | 0 | 12 (all) | 1.000" in format_markdown([s], {("params", 0.0): (0.72, 0.54)})


def test_time_limit_zero_scores_nothing(tmp_path, param_table):
    x, y = _images()
    csv = tmp_path / "s.csv"
    run_correlation(CorrelateConfig(archs=3, proxies=("params",), batch_size=4, k=2), x, y, param_table, csv,
                    progress=False, time_limit_s=-1)
    assert read_rows(csv) == []


def test_warmup_levels_only_on_chosen_cells_with_their_proxies(tmp_path, param_table):
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    csv = tmp_path / "w.csv"
    cfg = CorrelateConfig(archs=4, proxies=("params",), warmup=(0.0, 0.5), warmup_archs=2, warmup_proxies=("nwot",),
                          batch_size=4, k=2, warmup_config=WarmupConfig(batch_size=4), channels=4, cells_per_stage=1)
    run_correlation(cfg, x, y, param_table, csv, progress=False)
    rows = read_rows(csv)
    zero = [r for r in rows if float(r["warmup"]) == 0]
    warm = [r for r in rows if float(r["warmup"]) == 0.5]
    assert len(zero) == 4 and all(r["proxy"] == "params" for r in zero)
    assert sorted(int(r["position"]) for r in warm) == [0, 2] and all(r["proxy"] == "nwot" for r in warm)
    assert all(float(r["warmup_s"]) > 0 for r in warm)
    assert json.loads(warm[0]["terms"])  # the proxy's terms travel with the row


def test_warmup_steps_and_training_changes_only_when_asked():
    assert warmup_steps(0.1, 4000, 64) == 7  # 400 images
    assert warmup_steps(0.0, 4000, 64) == 0
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    net = build_network("|nor_conv_1x1~0|+|skip_connect~0|none~1|+|none~0|none~1|skip_connect~2|", seed=0,
                        channels=4, cells_per_stage=1)
    before = [p.detach().clone() for p in net.parameters()]
    assert warm_up(net, x, y, 0.0, torch.Generator().manual_seed(0)) == []
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    losses = warm_up(net, x, y, 1.0, torch.Generator().manual_seed(0), WarmupConfig(batch_size=4))
    assert len(losses) == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters()))


def test_sigeo_term1_on_nb201_equals_library_zico_per_batch():
    # The benchmark reports ZiCo from SiGeo's first term (modules="zico"); check they are the same number.
    from ctrnas.proxies import get_proxy

    net = build_network("|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|none~1|nor_conv_3x3~2|",
                        seed=0, channels=4, cells_per_stage=1)
    g = torch.Generator().manual_seed(1)
    batches = [((torch.randn(4, 3, 8, 8, generator=g),), torch.randint(0, 10, (4,), generator=g)) for _ in range(4)]
    sigeo = get_proxy("sigeo", modules="zico").score(net, batches, F.cross_entropy)
    zico = get_proxy("zico").score(net, batches, F.cross_entropy)
    assert sigeo.terms["zico"] == pytest.approx(zico.value, rel=1e-9)
    assert sigeo.value == pytest.approx(sigeo.terms["zico"] + sigeo.terms["fr"], rel=1e-9)  # λ = (1, 1, 0)


def test_sigeo_lambdas_recombine_stored_terms():
    from ctrnas.vision.correlate import metric_values

    rows = [{"arch": "a", "warmup": "0.1", "proxy": "sigeo", "value": "0",
             "terms": json.dumps({"zico": 10.0, "fr": 2.0, "loss": 3.0})}]
    assert metric_values(rows, "sigeo@1,50,1", 0.1) == {"a": 10.0 + 100.0 - 3.0}
    assert metric_values(rows, "sigeo@1,0,0", 0.1) == {"a": 10.0}
    assert metric_values(rows, "sigeo.fr", 0.1) == {"a": 2.0}
    assert metric_values(rows, "sigeo", 0.0) == {}


def test_reverse_worker_scores_the_same_sample_from_the_end(tmp_path, param_table):
    x, y = _images(8)
    csv = tmp_path / "r.csv"
    cfg = CorrelateConfig(archs=5, proxies=("params",), batch_size=4, k=2, reverse=True)
    run_correlation(cfg, x, y, param_table, csv, progress=False)
    rows = read_rows(csv)
    assert [int(r["position"]) for r in rows] == [4, 3, 2, 1, 0]
    assert [r["arch"] for r in rows] == [c.to_str() for c in sample_cells(5, 0)][::-1]


def test_warmup_above_one_is_several_reshuffled_passes():
    assert warmup_steps(1.25, 4000, 64) == 79  # 5000 images: the paper's 10% of 50,000, as 1.25 epochs of 4000
    assert warmup_steps(0.4, 4000, 64) == 25
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    net = build_network("|nor_conv_1x1~0|+|skip_connect~0|none~1|+|none~0|none~1|skip_connect~2|", seed=0,
                        channels=4, cells_per_stage=1)
    assert len(warm_up(net, x, y, 2.5, torch.Generator().manual_seed(0), WarmupConfig(batch_size=4))) == 5
    # A fraction <= 1 draws the same images as before the extension (the first pass's prefix).
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(torch.randperm(8, generator=g1)[:4], torch.cat([torch.randperm(8, generator=g2)])[:4])


def test_state_dir_reuses_the_warmed_network_and_adds_proxies_later(tmp_path, param_table):
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    kw = dict(archs=2, proxies=("params",), warmup=(0.5,), warmup_archs=2, batch_size=4, k=2,
              warmup_config=WarmupConfig(batch_size=4), channels=4, cells_per_stage=1)
    a, b, states = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "states"
    run_correlation(CorrelateConfig(warmup_proxies=("nwot",), **kw), x, y, param_table, a, progress=False,
                    state_dir=states)
    assert len(list(states.glob("*.pt"))) == 2
    # A later run on another CSV with one more proxy: nwot is done there (done_csvs), frnorm is new, and the
    # saved warm-up is loaded, so its scores equal those of a fresh warm-up (deterministic) ...
    run_correlation(CorrelateConfig(warmup_proxies=("nwot", "frnorm"), **kw), x, y, param_table, b, progress=False,
                    state_dir=states, done_csvs=(a,))
    rows_b = read_rows(b)
    assert {r["proxy"] for r in rows_b} == {"frnorm"} and len(rows_b) == 2
    fresh = tmp_path / "c.csv"
    run_correlation(CorrelateConfig(warmup_proxies=("frnorm",), **kw), x, y, param_table, fresh, progress=False)
    assert [r["value"] for r in read_rows(fresh)] == [r["value"] for r in rows_b]
    # ... and the warm-up time recorded is the original one.
    assert [r["warmup_s"] for r in rows_b] == [r["warmup_s"] for r in read_rows(a)]


def test_sigeo_ps_swaps_in_the_per_sample_fr_term():
    from ctrnas.vision.correlate import metric_values

    rows = [{"arch": "a", "warmup": "0.2", "proxy": "sigeo", "value": "0",
             "terms": json.dumps({"zico": 10.0, "fr": 2.0, "loss": 3.0})},
            {"arch": "a", "warmup": "0.2", "proxy": "frnorm", "value": "0.5",
             "terms": json.dumps({"fr_sample": 0.5, "fr_batch": 2.0})},
            {"arch": "b", "warmup": "0.2", "proxy": "sigeo", "value": "0",
             "terms": json.dumps({"zico": 1.0, "fr": 2.0, "loss": 3.0})}]
    assert metric_values(rows, "sigeo_ps@1,50,1", 0.2) == {"a": 10.0 + 25.0 - 3.0}
    assert metric_values(rows, "frnorm.fr_batch", 0.2) == {"a": 2.0}


def test_two_worker_processes_score_the_rows_of_one(tmp_path, param_table):
    """run_sharded hands its inputs to spawned workers through a weights-only torch file (never a pickle)."""
    from ctrnas.vision.shards import run_sharded

    x, y = _images()
    cfg = CorrelateConfig(archs=4, proxies=("params",), batch_size=4, k=2, seed=0)
    run_correlation(cfg, x, y, param_table, tmp_path / "one.csv", progress=False)
    run_sharded(cfg, x, y, param_table, tmp_path / "two.csv", workers=2)
    key = lambda r: r["arch"]  # noqa: E731
    one, two = sorted(read_rows(tmp_path / "one.csv"), key=key), sorted(read_rows(tmp_path / "two.csv"), key=key)
    assert [(r["arch"], r["value"]) for r in one] == [(r["arch"], r["value"]) for r in two]
    assert not list(tmp_path.glob(".*inputs*"))  # the inputs file is removed


def test_a_failing_worker_is_named_in_one_line_and_its_inputs_file_removed(tmp_path, param_table):
    """Each worker's error comes back as one line naming the worker (the others finish first), on the
    execution layer's processes."""
    from ctrnas.errors import CtrnasError
    from ctrnas.vision.shards import run_sharded

    x, y = _images()
    cfg = CorrelateConfig(archs=2, proxies=("params",), batch_size=4, k=2, seed=0)
    with pytest.raises(CtrnasError, match=r"worker\(s\) \[0, 1\] failed \(0: .*bogus.*; 1: .*re-run"):
        run_sharded(cfg, x, y, param_table, tmp_path / "two.csv", workers=2, device="bogus")
    assert not list(tmp_path.glob(".*inputs*")) and not list(tmp_path.glob("two.worker*.csv"))
