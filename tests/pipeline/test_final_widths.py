"""`final.emb_dims`: the final stage also retrains the search's best candidate at other embedding widths
(short trainings cannot rank the width), and picks among all of them by val log loss as before."""

import dataclasses

import numpy as np
import pytest

from ctrnas import api
from ctrnas.errors import RecipeError
from ctrnas.search.history import HistoryRecord
from ctrnas.space import Arch, get_space
from ctrnas.supernet import count_params

WIDTHS = ("space.emb_dims=[8, 16, 32]", "search.strategy=multifidelity",
          "search.multifidelity.rungs=[{fitness: short, budget: 1024, keep: 0.5}, {fitness: short, budget: 2048}]")


def _recipe(tests_recipe_path, data_dir, *more):
    return api.load_recipe(tests_recipe_path, f"data.path={data_dir}", *WIDTHS, *more)


def _records(recipe, n: int) -> list[HistoryRecord]:
    space = get_space(recipe.space)
    archs = [dataclasses.replace(space.sample(np.random.default_rng(i)), emb_dim=None) for i in range(n)]
    return [HistoryRecord(i, 0, a.key(), a.to_json(), 0.5 + i, params=1.0, flops=2.0) for i, a in enumerate(archs)]


def test_the_best_is_added_at_each_other_width_and_its_own_width_keeps_its_key(tests_recipe_path, data_dir,
                                                                                  tests_data):
    from ctrnas.pipeline.final import width_variants

    recipe = _recipe(tests_recipe_path, data_dir, "final.emb_dims=[8, 16, 32]")
    top = _records(recipe, 2)
    extra = width_variants(recipe, tests_data, top)
    best = Arch.from_json(top[0].arch)
    assert [Arch.from_json(r.arch) for r in extra] == [dataclasses.replace(best, emb_dim=8),
                                                       dataclasses.replace(best, emb_dim=32)]
    assert [r.meta["width"] for r in extra] == [8, 32] and {r.meta["width_of"] for r in extra} == {top[0].key}
    assert [r.index for r in extra] == [0, 0] and [r.key for r in extra] == [Arch.from_json(r.arch).key() for r in extra]
    # 16 is the run's width (train.embedding_dim): the best itself, not a second copy under another key
    assert all(Arch.from_json(r.arch).emb_dim != 16 for r in extra)
    for r in extra:
        assert r.params == count_params(tests_data.schema, recipe.space, Arch.from_json(r.arch), emb_dim=16)
    assert extra[1].params > extra[0].params
    # a width the top-k already hold is not trained twice
    held = dataclasses.replace(top[1], key=extra[1].key, arch=extra[1].arch)
    assert [r.meta["width"] for r in width_variants(recipe, tests_data, [top[0], held])] == [8]
    # nor the best's own width written out (16 = the run's width, as a space with emb_dims may draw it)
    spelled = dataclasses.replace(top[0], arch=dataclasses.replace(best, emb_dim=16).to_json())
    assert [r.meta["width"] for r in width_variants(recipe, tests_data, [spelled])] == [8, 32]
    assert width_variants(_recipe(tests_recipe_path, data_dir), tests_data, top) == []


@pytest.mark.parametrize("dims, match", [("[16, 16]", "distinct"), ("[0]", "positive"),
                                         ("[64]", r"the space does not: it has \[8, 16, 32\]")])
def test_bad_widths_are_refused(tests_recipe_path, data_dir, dims, match):
    with pytest.raises(RecipeError, match=f"final.emb_dims.*{match}"):
        _recipe(tests_recipe_path, data_dir, f"final.emb_dims={dims}")
    with pytest.raises(RecipeError, match=r"final.emb_dims.*it has \[16\]"):  # a space of one width
        api.load_recipe(tests_recipe_path, f"data.path={data_dir}", "final.emb_dims=[16, 32]")


def test_the_widths_do_not_change_a_finished_job(tests_recipe_path, data_dir, tests_data):
    """A re-run that adds `final.emb_dims` reuses the top-k trainings it already has."""
    from ctrnas.pipeline.final.resume import fingerprint

    a = _recipe(tests_recipe_path, data_dir)
    b = _recipe(tests_recipe_path, data_dir, "final.emb_dims=[16, 32]")
    assert fingerprint(a, tests_data) == fingerprint(b, tests_data)


def test_the_dense_init_changes_a_job_only_when_it_is_not_the_old_default(tests_recipe_path, data_dir, tests_data):
    """Folders written before `final.dense_init` existed (NASRec's init) stay valid; the other init retrains."""
    from ctrnas.pipeline.final.resume import fingerprint

    plain = fingerprint(_recipe(tests_recipe_path, data_dir, "final.dense_init=nasrec"), tests_data)
    assert "dense_init" not in plain["final"]
    default = fingerprint(_recipe(tests_recipe_path, data_dir), tests_data)  # torchrec
    assert default != plain and default["final"]["dense_init"] == "torchrec"
    # the search's checkpoint likewise (its short-training rungs train as the final stage)
    from ctrnas.pipeline.fitness.build import short_training_fingerprint

    fp = short_training_fingerprint(_recipe(tests_recipe_path, data_dir, "final.dense_init=nasrec"))
    assert set(fp) == {"final_train"}
    assert short_training_fingerprint(_recipe(tests_recipe_path, data_dir)) == {**fp, "final_dense_init": "torchrec"}


AT_TWO_WIDTHS = ("space.emb_dims=[16, 32]", "final.emb_dims=[16, 32]", "final.baselines=[]")


@pytest.fixture(scope="module")
def width_run(tests_recipe_path, data_dir, tmp_path_factory):
    """One serial run that searches the width and retrains the best at the other width (shared: two tests)."""
    out = tmp_path_factory.mktemp("widths") / "serial"
    return api.run(_recipe(tests_recipe_path, data_dir, f"output={out}", *AT_TWO_WIDTHS), progress=False, echo=None)


def test_a_run_retrains_the_best_at_the_other_width_and_counts_it(width_run):
    import csv

    from ctrnas.supernet.io import load_exported

    result = width_run
    cands = result.final.candidates
    own = cands[0].arch.emb_dim or 16  # the search chose the best's width; the other one is added
    other = 48 - own
    assert [c.label for c in cands] == ["rank 0", "rank 1", f"rank 0 at width {other}"]
    assert cands[2].arch == dataclasses.replace(cands[0].arch, emb_dim=None if other == 16 else other)
    assert (cands[2].params > cands[0].params) == (other > own)
    with open(result.output_dir / "final/models.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["label"] for r in rows] == [c.label for c in cands]
    assert [int(r["emb_dim"]) for r in rows] == [c.arch.emb_dim or 16 for c in cands]  # its own or the run's
    assert result.metrics["compute"]["fte"]["final"] == pytest.approx(3.0)
    best = min((c for c in cands), key=lambda c: c.val["logloss"])
    assert result.metrics["best"]["label"] == best.label
    exported = load_exported(result.output_dir / "model")
    assert {b.weight.shape[1] for b in exported.stem.ebc.embedding_bags.values()} == {best.arch.emb_dim or 16}


@pytest.mark.slow
def test_worker_processes_give_the_same_labelled_models_and_a_rerun_resumes_them(tests_recipe_path, data_dir,
                                                                                 width_run, tmp_path, capsys):
    """The width label survives the worker processes, and a re-run reads its job folders back untrained. The
    final stage of the serial run's search (its data, warm-up and search are not redone: only the final
    stage differs), in worker processes."""
    serial = width_run
    par_recipe = _recipe(tests_recipe_path, data_dir, f"output={tmp_path}/par", *AT_TWO_WIDTHS, "final.workers=2")

    def final_in_workers():
        return api.train_final(par_recipe, serial.data, serial.search, serial.warmup, progress=False)

    par = final_in_workers()
    labels = [c.label for c in serial.final.candidates]
    assert labels[-1].startswith("rank 0 at width ")
    assert [c.label for c in par.candidates] == labels
    assert [c.test["logloss"] for c in par.candidates] == [c.test["logloss"] for c in serial.final.candidates]
    # the chosen one is not rank 0, so a re-run must not ask for the weights rank 0's folder dropped
    assert par.best.label != "rank 0"

    # the re-run trains in worker processes too: no folder's result or kept weights is written again
    folders = tmp_path / "par/final/train"
    stamps = {p: p.stat().st_mtime_ns for p in folders.glob("*/*") if p.suffix in (".json", ".pt")}
    assert any(p.suffix == ".pt" for p in stamps)  # the chosen one's weights, which the re-run exports
    capsys.readouterr()
    again = final_in_workers()
    assert {p: p.stat().st_mtime_ns for p in folders.glob("*/*") if p.suffix in (".json", ".pt")} == stamps
    assert f"final stage: resumed: {', '.join(labels)} done (not retrained)" in capsys.readouterr().err
    assert [c.test["logloss"] for c in again.candidates] == [c.test["logloss"] for c in par.candidates]


def test_baselines_are_trained_at_every_width_the_search_may_choose(tests_recipe_path, data_dir, tests_data):
    """Fair widths: with final.emb_dims, each baseline is trained at those widths too, labelled by width."""
    from ctrnas.pipeline.final import final_stage
    from ctrnas.pipeline.fitness.scratch import baseline_jobs
    from ctrnas.train.baselines import build_baseline
    from tests.helpers.chains import chain_arch, search_of

    recipe = _recipe(tests_recipe_path, data_dir, "space.emb_dims=[16, 32]", "final.emb_dims=[16, 32]",
                     "final.baselines=[dlrm]", "final.top_k=1", "space.num_blocks=3", "space.dense_ops=[fc,dot]")
    assert baseline_jobs(recipe) == ["dlrm", "dlrm@32"]
    final = final_stage(recipe, tests_data, search_of([chain_arch("fc", 3)]), None, None, progress=False)
    assert [b.label for b in final.baselines] == ["dlrm", "dlrm at width 32"]
    # the second is DLRM with 32-wide tables: its dense part is that module's
    wide = build_baseline("dlrm", tests_data.schema, dim=32)
    dense = sum(p.numel() for n, p in wide.named_parameters() if "embedding_bags" not in n)
    assert final.baselines[1].params == dense != final.baselines[0].params
    assert final.baselines[0].val["logloss"] != final.baselines[1].val["logloss"]
