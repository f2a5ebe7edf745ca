"""Serving an exported model: `predict` scores raw rows with a run's `model/` folder (the `model.pt2` program
and `transform.json` that `ctrnas.supernet.serving` and `ctrnas.data.preprocess` write beside it).

`program` runs `model.pt2` with torch alone (no TorchRec, no `torch.export.load`); a folder it cannot run
is scored by the model rebuilt from model.pt.

Writing the artifact stays in `ctrnas.supernet` (`export`, `save_exported`, `serving.save_serving`): it
reads the supernet's internals. This package only reads what they wrote, so the pipeline never imports it.
"""
