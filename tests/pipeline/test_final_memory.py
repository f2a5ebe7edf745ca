"""Before the final stage starts N training workers it estimates one model's memory and starts fewer, trains in
its own process, or stops with a clear error when they would not fit; a worker killed by a signal is reported
with the job it ran."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from ctrnas.errors import NotEnoughMemory, RecipeError, WorkerDied
from ctrnas.pipeline.final import memory as final_memory
from ctrnas.pipeline.final.memory import (GIB, WORKER_BYTES, cgroup_room, fit_workers, job_sizes,
                                          model_size, tiny_schema, workers_that_fit)
from ctrnas.pipeline.fitness.scratch import final_template
from ctrnas.pipeline.results import DataResult
from ctrnas.recipe import recipe_from_dict
from ctrnas.supernet import count_params
from ctrnas.supernet.stem import EmbeddingStem
from ctrnas.supernet.testing import make_schema
from ctrnas.train.baselines.lr import LR
from ctrnas.train.config import TrainConfig
from ctrnas.train.normalise import use_layernorm

SPACE = {"base": "nasrec-small", "num_blocks": 2, "dense_dims": [8, 16], "sparse_tokens": [4]}
MIB = 2**20


class Toy(nn.Module):
    """A 2-wide table per field (not looked up) and logit = l2(relu(l1(dense))): backward needs the dense input
    (for l1's weight gradient), relu's output (its mask, and l2's input), the logits and the labels (log loss)."""

    def __init__(self, schema, hidden=5):
        super().__init__()
        self.stem = EmbeddingStem(schema, dim=2)
        self.l1, self.l2 = nn.Linear(schema.dense_dim, hidden), nn.Linear(hidden, 1)

    def forward(self, dense, kjt):
        return self.l2(torch.relu(self.l1(dense))).squeeze(1)


def test_saved_activations_are_the_tensors_backward_needs_per_example():
    schema = make_schema(n_dense=3, cards=(10, 20, 5))
    size = model_size(lambda rows: Toy(tiny_schema(schema, rows)), schema, None)
    assert size.saved_per_example == 4 * (3 + 5 + 1 + 1)  # dense input, relu output, logit, label (float32)
    assert size.table_params == 2 * (10 + 20 + 5) and size.row_width == 2 and size.fields == 3
    assert size.dense_params == (3 * 5 + 5) + (5 + 1)


def test_tables_of_different_widths_count_rows_times_their_width():
    """Per-table widths: a 100k-row table 32 wide and three 10-row tables 4 wide."""
    import numpy as np

    from ctrnas.supernet import Supernet, export

    schema = make_schema(n_dense=3, cards=(100_000, 10, 10, 10))
    space = {"base": "ctrnas-small", "num_blocks": 2, "dense_dims": [8], "sparse_tokens": [4],
             "table_dims": [0, 4, 8, 16, 32]}

    def build(rows):
        net = Supernet(tiny_schema(schema, rows), space, emb_dim=32)
        arch = dataclasses.replace(net.space.sample(np.random.default_rng(0)),
                                   table_dims=(("C1", 4), ("C2", 4), ("C3", 4)))
        return export(net, arch, init="fresh")

    size = model_size(build, schema, None)
    assert size.table_params == 100_000 * 32 + 3 * 10 * 4


def test_lr_training_memory_is_the_hand_count():
    schema = make_schema(n_dense=3, cards=(10, 20, 5))
    size = model_size(lambda rows: LR(tiny_schema(schema, rows), row_cap=8), schema, 8)
    # tables of min(cardinality, 8) rows, 1 weight each; dense: 3 weights + the linear's bias + the model's bias
    assert (size.table_params, size.dense_params, size.row_width) == (8 + 8 + 5, 3 + 1 + 1, 1)
    act = size.saved_per_example
    assert act > 0
    cfg = TrainConfig(batch_size=8, eval_batch_size=32)
    # weights + one Adagrad sum per table weight; gradient rows of a batch (8 rows x 3 ids x width 1) and
    # their squares; dense weights, gradients, Adagrad sums; activations of the larger (evaluation) batch
    assert size.training_bytes(cfg) == 4 * (21 * 2 + 2 * 8 * 3 + 5 * 3) + 32 * act
    # dense updates: whole-table gradients instead of gradient rows; a training batch larger than evaluation's
    dense = dataclasses.replace(cfg, embedding_update="dense", batch_size=64)
    assert size.training_bytes(dense) == 4 * (21 * 3 + 5 * 3) + 128 * act
    # model selection keeps one copy of every weight (the best evaluation's) beside the training ones
    best = dataclasses.replace(cfg, restore_best=True)
    assert size.training_bytes(best) == size.training_bytes(cfg) + 4 * (21 + 5)
    assert size.weight_bytes == 4 * (21 + 5)


def _stage(final: dict | None = None, execution: dict | None = None):
    recipe = recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE, "final": final or {},
                               **({"execution": execution} if execution else {})})
    data = DataResult(Path("x"), make_schema(cards=(5000, 7, 300, 11)), {})
    torch.manual_seed(0)
    from ctrnas.space import get_space

    archs = [("arch", get_space(recipe.space).sample(np.random.default_rng(i))) for i in range(3)]
    return recipe, data, final_template(recipe, data, None), archs + [("baseline", "lr")]


def test_an_arch_model_counts_its_tables_and_the_analytic_dense_parameters():
    recipe, data, template, jobs = _stage({"train": {"row_cap": 1000}})
    sizes = job_sizes(recipe, data, template, jobs)
    for (kind, arch), size in zip(jobs[:3], sizes):
        assert size.table_params == (1000 + 7 + 300 + 11) * 16
        space = template[use_layernorm("auto", arch, True)].space  # final.layernorm auto: by product degree
        assert size.dense_params == count_params(data.schema, space, arch)
    assert sizes[3].table_params == 1000 + 7 + 300 + 11 and sizes[3].dense_params == 3 + 1 + 1
    assert template[False].stem.rows == [1000, 7, 300, 11]  # the estimate left the template's tables alone


def test_first_order_tables_are_counted_as_tables_at_full_size():
    recipe, data, template, jobs = _stage({"train": {"row_cap": 1000}})
    recipe = dataclasses.replace(recipe, space=dataclasses.replace(recipe.space, first_order=(False, True)))
    template = final_template(recipe, data, None)
    arch = dataclasses.replace(jobs[0][1], first_order=True)
    size, = job_sizes(recipe, data, template, [("arch", arch)])
    assert size.table_params == (1000 + 7 + 300 + 11) * (16 + 1)  # the 1-wide tables, not the mean width
    space = template[use_layernorm("auto", arch, True)].space
    assert size.dense_params == count_params(data.schema, space, arch)
    assert template[False].first_order is template[True].first_order  # shared, as the stem
    assert template[False].first_order.rows == [1000, 7, 300, 11]


def _fake_available(monkeypatch, n: int):
    monkeypatch.setattr(final_memory, "available_memory", lambda: n)


def _counts(recipe, data, template, jobs) -> tuple[int, int, int, int]:
    """(one model's training bytes, its weights, one worker's bytes, this process's bytes beside the workers),
    from the stage's own sizes as the docstring of `fit_workers` counts them."""
    sizes = job_sizes(recipe, data, template, jobs)
    model = max(s.training_bytes(recipe.final_train) for s in sizes)
    weights = max(s.weight_bytes for s in sizes)
    held = final_memory.tensor_bytes(*template.values())
    return model, weights, WORKER_BYTES + held + max(model, held), held + max(held, 2 * weights)


def test_workers_are_lowered_to_what_fits_with_one_line_saying_why(monkeypatch, capsys):
    recipe, data, template, jobs = _stage({"workers": 4})
    _fake_available(monkeypatch, 64 * GIB)  # room for 4 tiny models, on any machine the tests run on
    assert workers_that_fit(recipe, data, template, jobs, 4) == 4
    model, _, per_worker, here = _counts(recipe, data, template, jobs)
    _fake_available(monkeypatch, here + 3 * per_worker + per_worker // 2)
    assert workers_that_fit(recipe, data, template, jobs, 4) == 3
    err = capsys.readouterr().err.strip()
    assert "4 training workers" in err and "training 3 at a time" in err and "\n" not in err
    _fake_available(monkeypatch, here + per_worker)  # one worker fits: this process trains them instead
    assert workers_that_fit(recipe, data, template, jobs, 4) == 0
    assert "one at a time in this process" in capsys.readouterr().err
    _fake_available(monkeypatch, model // 2)
    with pytest.raises(NotEnoughMemory, match="training one model needs") as e:
        workers_that_fit(recipe, data, template, jobs, 4)
    assert "\n" not in str(e.value)


def test_available_memory_is_at_most_what_the_machine_has():
    import psutil

    assert 0 < final_memory.available_memory() <= psutil.virtual_memory().total


def test_memory_limit_gb_replaces_the_available_memory(monkeypatch):
    _fake_available(monkeypatch, 1 << 50)
    recipe, data, template, jobs = _stage({"workers": 2, "memory_limit_gb": 0.0001})
    with pytest.raises(NotEnoughMemory, match="final.memory_limit_gb"):
        workers_that_fit(recipe, data, template, jobs, 2)
    with pytest.raises(RecipeError, match="final.memory_limit_gb"):
        _stage({"memory_limit_gb": 0})


def test_worker_processes_asked_for_by_name_are_kept_down_to_one(monkeypatch):
    recipe, data, template, jobs = _stage({"workers": 3}, {"backend": "processes"})
    _, _, per_worker, here = _counts(recipe, data, template, jobs)
    _fake_available(monkeypatch, here + per_worker)
    assert workers_that_fit(recipe, data, template, jobs, 3) == 1
    _fake_available(monkeypatch, here)
    with pytest.raises(NotEnoughMemory):
        workers_that_fit(recipe, data, template, jobs, 3)


def test_fit_workers_by_hand():
    g = GIB
    # 10 GiB available, each worker 0.5 GiB + 1 template + 2 model = 3.5 GiB, this process 1 + 2 x 0.5 = 2 GiB
    assert fit_workers(2, 2 * g, g // 2, g, 10 * g, True) == (2, None)
    n, note = fit_workers(4, 2 * g - WORKER_BYTES, g // 2, g, 10 * g, True)
    assert n == 2 and "training 2 at a time" in note and "10.0 GiB available" in note
    assert fit_workers(0, 3 * g, g, g, 4 * g, True) == (0, None)  # in this process: 3 + 1 GiB fit in 4
    with pytest.raises(NotEnoughMemory, match="~4.0 GiB"):
        fit_workers(0, 3 * g, g, g, 4 * g - 1, True)


def test_a_training_worker_killed_by_a_signal_is_reported_with_its_job():
    from ctrnas.pipeline.final.workers import training_executor
    from tests.helpers.final_jobs import KilledFolder

    recipe = recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE,
                               "execution": {"backend": "processes", "workers": 1}})
    data = DataResult(Path("x"), make_schema(), {})
    with training_executor(recipe, data, None, 1, 1) as ex:
        with pytest.raises(WorkerDied) as e:
            ex.map([(("baseline", "lr"), False, "baseline lr", KilledFolder())])
    text = str(e.value)
    assert "the training of baseline lr" in text and "SIGKILL" in text and "\n" not in text


def test_cgroup_room_is_limit_less_usage_plus_reclaimable_cache(tmp_path):
    g = GIB
    (tmp_path / "memory.max").write_text(f"{8 * g}\n")
    (tmp_path / "memory.current").write_text(f"{3 * g}\n")
    (tmp_path / "memory.stat").write_text(f"anon {2 * g}\ninactive_file {g}\nactive_file 5\n")
    assert cgroup_room(tmp_path, "memory.max", "memory.current", "inactive_file") == 6 * g
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    assert cgroup_room(tmp_path, "memory.max", "memory.current", "inactive_file") is None
    (tmp_path / "memory.max").write_text("9223372036854771712\n")  # cgroup v1 without a limit
    assert cgroup_room(tmp_path, "memory.max", "memory.current", "inactive_file") is None
    assert cgroup_room(tmp_path / "absent", "memory.max", "memory.current", "inactive_file") is None


def test_a_serial_backend_trains_in_this_process_when_the_model_fits(monkeypatch):
    recipe, data, template, jobs = _stage({"workers": 4}, {"backend": "serial"})
    model, weights, _, _ = _counts(recipe, data, template, jobs)
    _fake_available(monkeypatch, model + weights)  # one model with the best one's weights, nothing more
    assert workers_that_fit(recipe, data, template, jobs, 4) == 0
    _fake_available(monkeypatch, model + weights - 1)
    with pytest.raises(NotEnoughMemory, match="training one model needs"):
        workers_that_fit(recipe, data, template, jobs, 4)


def test_a_private_local_ray_is_counted_as_worker_processes_a_cluster_is_not(monkeypatch):
    recipe, data, template, jobs = _stage({"workers": 3}, {"backend": "ray"})
    _, _, per_worker, here = _counts(recipe, data, template, jobs)
    _fake_available(monkeypatch, here + 2 * per_worker)
    assert workers_that_fit(recipe, data, template, jobs, 3) == 2  # its actors run on this machine
    cluster, *_ = _stage({"workers": 3}, {"backend": "ray", "address": "auto"})
    assert workers_that_fit(cluster, data, template, jobs, 3) == 3  # they may run on other machines


def _limit(folder, limit, usage, names=("memory.max", "memory.current")):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / names[0]).write_text(f"{limit}\n")
    (folder / names[1]).write_text(f"{usage}\n")


def test_cgroup_room_is_the_lowest_over_the_process_cgroup_and_its_parents(tmp_path):
    g = GIB
    own, root = tmp_path / "cgroup", tmp_path / "fs"
    own.write_text("0::/user.slice/user-1000.slice/session-1.scope\n")
    _limit(root / "user.slice/user-1000.slice/session-1.scope", "max", 5 * g)  # no limit of its own
    _limit(root / "user.slice/user-1000.slice", 6 * g, 5 * g)  # a parent's: 1 GiB left
    _limit(root / "user.slice", 64 * g, 10 * g)
    assert final_memory._cgroup_room(own, root) == g
    # cgroup v1 in a container whose own cgroup is mounted at the root: /docker/<id> is not there, the root is
    own.write_text("12:cpu,cpuacct:/docker/abc\n5:memory:/docker/abc\n")
    _limit(root / "memory", 2 * g, g // 2, ("memory.limit_in_bytes", "memory.usage_in_bytes"))
    assert final_memory._cgroup_room(own, root) == 3 * g // 2
    own.write_text("0::/\n")
    (root / "memory.max").write_text("max\n")
    assert final_memory._cgroup_room(own, root) is None


def test_workers_and_the_memory_limit_leave_a_resumed_final_stage_its_finished_trainings():
    from ctrnas.pipeline.final.resume import fingerprint

    data = DataResult(Path("x"), make_schema(), {"splits": {"train": {"rows": 10, "ctr": 0.5}}})

    def fp(**final):
        return fingerprint(recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE, "final": final}), data)

    assert fp() == fp(workers=3, memory_limit_gb=2.5)  # how many at once, not what is trained
    assert fp() != fp(train_rows=512)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS read from /proc (Linux)")
def test_a_worker_builds_the_template_from_its_shape_within_the_estimate():
    """The template reaches a worker as its shape (space, width, row cap), never as pickled bytes: the worker
    builds it, the same structure as the stage's, within the two copies the estimate counts."""
    from ctrnas.execution.processes import ProcessExecutor
    from ctrnas.pipeline.final.workers import _rebuild, _setup_training, _shape
    from tests.helpers.final_jobs import peak_rss_mib

    def template(rows: int):
        data = DataResult(Path("x"), make_schema(n_dense=2, cards=(rows, 5)), {})
        recipe = recipe_from_dict({"name": "t", "data": {"path": "x"}, "space": SPACE})
        return data, final_template(recipe, data, None)

    def peak(rows: int) -> int:
        data, t = template(rows)
        with ProcessExecutor(peak_rss_mib, (None, data, _shape(t)), workers=1, setup=_setup_training) as ex:
            return ex.map([0])[0]

    data, t = template(100)
    built = _rebuild(data, _shape(t))
    for k in t:  # final.layernorm auto: both LayerNorm settings, one embedding stem between them
        assert {n: v.shape for n, v in built[k].state_dict().items()} == {n: v.shape for n, v in t[k].state_dict().items()}
    assert built[False].stem is built[True].stem

    size = 128  # MiB of one 16-wide float32 table (the first-order tables add 1/16)
    extra = peak(size * MIB // 64) - peak(100)
    # the estimate's two templates per worker: both LayerNorm settings are built, each with its own tables until
    # the second's are swapped for the first's (as the stage's own final_template does)
    assert 0.9 * size <= extra <= 2.2 * size
    g = GIB  # the estimate (unchanged): a 1 GiB template and a 0.25 GiB model need 0.5 + 1 + 1 GiB per worker
    assert fit_workers(1, g // 4, g // 8, g, WORKER_BYTES + 4 * g, False) == (1, None)
    with pytest.raises(NotEnoughMemory, match="~4.5 GiB"):
        fit_workers(1, g // 4, g // 8, g, WORKER_BYTES + 4 * g - 1, False)
