"""The CTR fitness a search scores candidates with, below the stages that use it.

  ctr_fitness  ProxyFitness (a registry proxy on k batches) and OneShotFitness (inherited weights)
  scratch      one model trained from scratch with the final stage's settings (the final stage and the
               short-training rung share it)
  rungs        the multi-fidelity ladder: proxy, one-shot, short-training and random rungs
  features     what the search's predictor reads of an arch (its features, size, zero-cost proxies)
  build        make_fitness from a recipe, resolve_warmup, the resource counters, the fingerprints
  scoring      `ctrnas score`: one architecture scored as the search scores it
Import the submodules directly.
"""
