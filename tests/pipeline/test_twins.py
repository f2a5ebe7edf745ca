"""A top-k candidate that is a baseline of the final stage (the seeded dlrm-like with `dlrm` among the
baselines) is trained once, as the baseline, and the report names it."""

from __future__ import annotations

from ctrnas.pipeline.final import final_stage
from ctrnas.pipeline.final.twins import twin_baselines
from ctrnas.recipe import load_recipe
from ctrnas.space.baselines import baseline_arch
from tests.helpers.chains import chain_arch, search_of

SPACE = ["space.base=ctrnas-small", "space.num_blocks=7", "space.dense_dims=[16,32,64,128,256,400]",
         "space.sparse_tokens=[16,32]", "space.dense_sparse_merge=[false]"]


def test_a_twin_is_what_the_stage_would_build_as_the_baseline(tests_recipe_path, data_dir):
    dlrm, dcn = baseline_arch("dlrm-like").key(), baseline_arch("dcnv2-like").key()

    def twins(*sets):
        return twin_baselines(load_recipe(tests_recipe_path, [f"data.path={data_dir}", *SPACE, *sets]))

    assert twins("final.baselines=[lr,dlrm,dcnv2]") == {dlrm: ("dlrm-like", "dlrm"), dcn: ("dcnv2-like", "dcnv2")}
    assert twins("final.baselines=[lr,dcnv2]") == {dcn: ("dcnv2-like", "dcnv2")}
    # with LayerNorms, or another initialisation, the stage would build another model than the baseline
    assert twins("final.baselines=[dlrm]", "final.layernorm=true") == {}
    assert twins("final.baselines=[dlrm]", "final.dense_init=nasrec") == {}
    assert twins("final.baselines=[dlrm]", "final.embedding_init=nasrec") == {}


def test_the_stage_trains_the_seeded_dlrm_like_once_as_the_dlrm_baseline(tests_data, tests_recipe_path, data_dir,
                                                                        tmp_path):
    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", *SPACE, "final.top_k=2",
                                             "final.baselines=[dlrm]", "final.choose_from=all",
                                             "final.layernorm=false",  # one template to build
                                             "train.embedding_update=fused",  # as the demo trains
                                             "final.export=false"])  # the trainings are checked, not the model
    chain = chain_arch("fc", 7, tokens=16, fm=False)  # a cheap arch that is no baseline
    search = search_of([baseline_arch("dlrm-like"), chain])
    final = final_stage(recipe, tests_data, search, None, tmp_path, progress=False)
    assert [c.label for c in final.candidates] == ["rank 1"]  # its search rank, not its place in the stage
    assert final.candidates[0].arch == chain
    assert [b.label for b in final.baselines] == ["dlrm"]
    assert final.twins == {"rank 0 (dlrm-like)": "dlrm"}
    # one training folder per trained model: the candidate's (by its rank) and the baseline's
    assert sorted(p.name for p in (tmp_path / "final" / "train").iterdir()) == [
        "baseline-dlrm", f"rank1-{chain.key()}"]


def test_when_every_candidate_is_a_twin_the_best_is_still_retrained(tests_recipe_path, data_dir):
    from ctrnas.pipeline.final.twins import split_twins

    recipe = load_recipe(tests_recipe_path, [f"data.path={data_dir}", *SPACE, "final.baselines=[dlrm,dcnv2]"])
    top = search_of([baseline_arch("dcnv2-like"), baseline_arch("dlrm-like")]).result.top_k(2)
    keep, left = split_twins(recipe, top)
    assert [(r.key, r.meta["rank"]) for r in keep] == [(baseline_arch("dcnv2-like").key(), 0)]
    assert left == {"rank 1 (dlrm-like)": "dlrm"}
