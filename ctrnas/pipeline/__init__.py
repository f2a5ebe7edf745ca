"""The end-to-end CTR pipeline: prepare data -> warm up the supernet -> search -> retrain the top-k -> report.

Stages (each a module, each returning a typed result from `results`):
  data      the prepared dataset folder (made from raw files or a synthetic profile when needed); rows in memory
  warmup    NASRec supernet training on the first `warmup.fraction` of the training split (0: none)
  search    a fitness (`fitness/`: proxy, one-shot or the multi-fidelity rungs) driven by the recipe's strategy
  final     (`final/`) the top-k of the history trained from scratch; the best on validation is tested and exported
  report    history CSV/JSON, best arch JSON, metrics JSON, summary.md, PNG plots, resolved recipe, versions
  compare   zero-shot (0) / sub-one-shot (0.01) / one-shot (1.0) side by side on the same data
  study     the proxy-ranking study (Kendall tau / Spearman rho of proxies vs trained test log loss)
  distributed  `ctrnas run --distributed`: the final stage's trainings sharded over torchrun ranks
  tasks     one-off tasks outside a run (`ctrnas train`, `warmup`, `export`; `score` is `fitness/scoring`) built
            from the same pieces
The Python API (`ctrnas.api`) and the CLI (`ctrnas.cli`) are thin layers over these. The inner layers (checked by
import-linter) are drawn in docs/architecture.md.
"""
