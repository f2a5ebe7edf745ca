"""Search strategies over any space that satisfies `space_protocol.SearchSpace`.

This package knows nothing about NASRec blocks or proxies (NASLib-style separation): a space gives
`sample(rng)`, `mutate(arch, rng)` and `arch.key()`; a fitness maps `(arch, seed)`, or `(arch, seed,
budget)` when it can spend more or less (see `fitness`), to a `FitnessResult` (or a bare float). Every
strategy is ask/tell; `run(fitness, ...)` drives it through `runner.run_search`, which owns the score
cache, parallel scoring (on a `ctrnas.execution` executor), history and per-generation checkpoints:

    from ctrnas.search.evolution import EvolutionConfig, RegularizedEvolution
    from ctrnas.search.constraints import ConstraintConfig, Constraints

    cons = Constraints(ConstraintConfig(max_params=5e6, mode="repair"), count_params=my_param_counter)
    search = RegularizedEvolution(space, EvolutionConfig(maximize=True), seed=0, constraints=cons)
    result = search.run(fitness, workers=2, checkpoint_path="run/search.ckpt", progress=True)
    result.history.to_csv("run/history.csv"); top15 = result.top_k(15)

Modules: build (recipe `search:` section -> strategy), strategies (the strategies by name), space_protocol,
fitness (results, ranking, seeds, cache), constraints, history, checkpoint, parallel, runner, evolution,
random_search, multifidelity, ranking (Kendall/Spearman + bootstrap), plots. (The tests' toy space is
tests/helpers/toy_search.py.)
Import the submodules directly; this file stays import-light so spawned scoring workers start fast.
"""
