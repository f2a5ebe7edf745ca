"""Files: exported models (module + TorchScript dense part + arch JSON + model card) and supernet checkpoints.

Exported folder layout ("ctrnas-export/2"):
  model.pt          the `ExportedModel`'s state_dict (tensors only); `load_exported` rebuilds the model from
                    model_card.json and arch.json and reads it with weights_only=True (never a pickle)
  dense_part.pt     TorchScript of `model.net` (dense [B, n_dense], tokens [B, F, E] -> logits [B]):
                    loads with `torch.jit.load` alone; an arch's terms outside it (`Arch.first_order`,
                    `Arch.field_fm`) are added by the model (and model.pt2), not by this part
  dense_part.pt2    (optional, `torch_export=True`) the same as a `torch.export` program, dynamic batch
  model.pt2         the whole model, tables included, as a `torch.export` program (encoded rows ->
                    probabilities): loads with torch alone, no ctrnas, no pickle (ctrnas.supernet.serving)
  transform.json    (+ vocab.parquet) the raw-row preprocessing, when the data is known (ctrnas.data.preprocess)
  arch.json         the architecture (`Arch.from_json` reads it)
  model_card.json   arch key, space, schema, params, FLOPs, init, metrics when known
  model_card.md     the same for people
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from ctrnas.config import to_dict
from ctrnas.data.dataset import atomic_write_text, versions
from ctrnas.errors import CtrnasError
from ctrnas.supernet.fresh import build_supernet  # noqa: F401 - the name callers import from here

EXPORT_FORMAT = "ctrnas-export/2"
SUPERNET_FORMAT = "ctrnas-supernet/1"


def model_card(model, init: str = "inherit", metrics: dict | None = None, source: str | None = None,
               origin: str | None = None) -> dict:
    """Facts about an exported model: params (with/without embeddings), FLOPs per example, metrics."""
    from ctrnas.supernet.counting import count_flops, count_params

    space = model.space_config
    dense_params = sum(p.numel() for p in model.net.parameters())
    emb_params = sum(p.numel() for stem in model.stems() for p in stem.parameters())  # first-order included
    return {
        "format": EXPORT_FORMAT,
        "arch_key": model.arch.key(),
        "space": to_dict(space),
        "schema": model.schema.to_json(),
        "emb_dim": model.stem.dim,
        "row_cap": model.stem.row_cap,
        "params_dense": dense_params,
        "params_embedding": emb_params,
        "embedding_bytes": sum(stem.embedding_bytes() for stem in model.stems()),
        # fields of width 0 (Arch.table_dims): no table; model.pt2 still takes their ids and ignores them
        "dropped_fields": [n for n, w in zip(model.stem.names, model.stem.widths) if w == 0],
        "params_analytic": count_params(model.schema, space, model.arch, emb_dim=model.stem.dim),
        "flops_per_example": count_flops(model.schema, space, model.arch, emb_dim=model.stem.dim),
        "live_blocks": list(model.arch.live_blocks()),
        "init": init,
        "source": source,
        **({"origin": origin} if origin else {}),
        "serving": {"file": "model.pt2", "inputs": "dense float32 [B, n_dense], ids int64 [B, n_sparse]",
                    "output": "click probability [B]", "load": "torch.export.load(path).module()"},
        "metrics": metrics or {},
        "versions": versions(),
    }


def metrics_markdown(metrics: dict | None) -> list[str]:
    """A model card's metrics as Markdown table lines, 5 significant digits (model_card.json keeps them all)."""
    if not metrics:
        return ["Metrics: not measured yet."]

    def show(v) -> str:
        return "-" if v is None else f"{v:.5g}" if isinstance(v, float) else str(v)

    return ["| metric | value |", "|---|---|"] + [f"| {k} | {show(v)} |" for k, v in metrics.items()]


def _card_markdown(card: dict) -> str:
    lines = [f"# ctrnas model {card['arch_key']}", ""] + ([card["origin"], ""] if card.get("origin") else []) + [
             f"- space: `{card['space']['name']}` ({card['space']['num_blocks']} blocks), live blocks "
             f"{card['live_blocks']}",
             f"- parameters: {card['params_dense']:,} dense + {card['params_embedding']:,} embedding",
             *([f"- fields dropped by the arch (ids read and ignored): {', '.join(card['dropped_fields'])}"]
               if card.get("dropped_fields") else []),
             f"- FLOPs per example (embedding lookups excluded): {card['flops_per_example']:,}",
             f"- weights: {card['init']}" + (f" from `{card['source']}`" if card["source"] else ""), ""]
    lines += metrics_markdown(card["metrics"])
    lines += ["", "Load: with torch alone (no ctrnas, no pickle), `torch.export.load(folder + '/model.pt2').module()"
              "(dense, ids)` gives click probabilities of encoded rows (dense float32 [B, n_dense], ids int64 "
              "[B, n_sparse] in the schema's order); `ctrnas predict --model FOLDER --input RAW_FILE --out "
              "preds.parquet` encodes raw rows with transform.json first. With ctrnas: "
              "`ctrnas.supernet.load_exported(folder)(dense, kjt)` (rebuilt from arch.json and model_card.json, "
              "weights read without unpickling), or the dense part alone with "
              "`torch.jit.load(folder + '/dense_part.pt')"
              "(dense, tokens)`.", ""]
    return "\n".join(lines)


def save_exported(model, folder: str | Path, init: str = "inherit", metrics: dict | None = None,
                  source: str | None = None, torch_export: bool = False, origin: str | None = None) -> dict:
    """Write `model` (an ExportedModel) to `folder` (see module docstring); returns the model card."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = model.cpu()
    from ctrnas.safeload import save_weights_file

    save_weights_file(model.state_dict(), folder / "model.pt", "model weights")
    with warnings.catch_warnings():
        # torch 2.13 deprecates TorchScript, but it still is the one format that loads with torch alone
        # in C++ and Python; `torch_export=True` also writes the torch.export program.
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(model.net).save(str(folder / "dense_part.pt"))
    from ctrnas.supernet.serving import save_serving

    save_serving(model, model.schema, folder)
    if torch_export:
        batch = torch.export.Dim("batch", min=2)
        example = (torch.zeros(2, model.schema.dense_dim), torch.zeros(2, len(model.schema.sparse), model.stem.dim))
        program = torch.export.export(model.net.eval(), example, dynamic_shapes=({0: batch}, {0: batch}))
        torch.export.save(program, str(folder / "dense_part.pt2"))
    atomic_write_text(folder / "arch.json", json.dumps(model.arch.to_json(), indent=1) + "\n")
    card = model_card(model, init=init, metrics=metrics, source=source, origin=origin)
    atomic_write_text(folder / "model_card.md", _card_markdown(card))
    atomic_write_text(folder / "model_card.json", json.dumps(card, indent=1) + "\n")  # last: marks completion
    return card


def load_exported(folder: str | Path):
    """Load an exported model: rebuilt from model_card.json (schema, space, widths) and arch.json, then its
    weights read from model.pt with weights_only=True. A model folder may come from anyone: nothing in it is
    unpickled, and every problem is one CtrnasError line."""
    from ctrnas.config import from_dict
    from ctrnas.data.schema import DatasetSchema
    from ctrnas.safeload import load_weights_file, one_line, read_json
    from ctrnas.space import Arch, SpaceConfig
    from ctrnas.supernet.export import export
    from ctrnas.data.sizes import check_card_sizes

    folder = Path(folder)
    card_path = folder / "model_card.json"
    if not card_path.exists() and not card_path.is_symlink():
        raise CtrnasError(f"{folder}: not a complete ctrnas export (model_card.json missing)")
    card = read_json(card_path, "model card")
    if not isinstance(card, dict):
        raise CtrnasError(f"{card_path}: not a ctrnas model card (not a JSON object)")
    if card.get("kind") == "baseline":
        raise CtrnasError(f"{folder}: a baseline fallback model: `ctrnas predict` (ctrnas.api.predict) rebuilds "
                          "it, or serve its model.pt2 with torch.export.load")
    if card.get("format") != EXPORT_FORMAT:
        raise CtrnasError(f"{card_path}: not a {EXPORT_FORMAT} model folder (format {card.get('format')!r}; "
                          "an export of an older ctrnas holds a pickled module, which is never loaded: export "
                          "the model again)")
    state = load_weights_file(folder / "model.pt", "model weights file", mmap=True)  # shapes, no copy yet
    check_card_sizes(card_path, card.get("schema"), card.get("emb_dim"), card.get("row_cap"), state,
                     folder / "model.pt")
    try:
        schema = DatasetSchema.from_json(card["schema"])
        space = from_dict(SpaceConfig, card["space"], source=str(card_path), prefix="space.")
        arch = Arch.from_json(read_json(folder / "arch.json", "architecture"))
        supernet = build_supernet(schema, space, None, card["emb_dim"], card["row_cap"], drawn=False)  # loaded below
        model = export(supernet, arch, copy_stem=False)
    except CtrnasError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise CtrnasError(f"{folder}: damaged model folder (model_card.json or arch.json): {one_line(e)}") from None
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as e:
        try:  # written before an export's crosses dropped the padded positions (ctrnas.supernet.compact)
            padded = export(supernet, arch, copy_stem=False, compact=False)
            padded.load_state_dict(state)
            return padded
        except (RuntimeError, TypeError, AttributeError):
            pass
        raise CtrnasError(f"{folder}/model.pt: weights do not fit the model of arch.json: {one_line(e)}") from None
    return model


def save_supernet(supernet, path: str | Path, extra: dict | None = None) -> None:
    """Checkpoint a supernet: schema, space, emb_dim, row_cap and state_dict (plus `extra`, e.g. step)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    from ctrnas.safeload import save_weights_file

    save_weights_file({"format": SUPERNET_FORMAT, "schema": supernet.schema.to_json(),
                       "space": to_dict(supernet.space.config), "emb_dim": supernet.emb_dim,
                       "row_cap": supernet.row_cap, "state_dict": supernet.state_dict(), "extra": extra or {}},
                      path, "supernet checkpoint")


def load_supernet(path: str | Path, schema=None, space=None, emb_dim: int | None = None,
                  row_cap: int | None = None):
    """Rebuild a supernet from a checkpoint; returns (supernet, extra).

    A `save_supernet` file carries its own schema and space. A bare `state_dict()` file (as `ctrnas warmup`
    wrote before it shared the pipeline's warm-up) needs `schema` and `space` (plus `emb_dim`/`row_cap` if not
    the defaults) to rebuild the shapes.
    """
    from ctrnas.config import from_dict
    from ctrnas.data.schema import DatasetSchema
    from ctrnas.space import SpaceConfig
    from ctrnas.supernet.supernet import Supernet

    from ctrnas.safeload import load_weights_file

    beside = Path(path).parent
    if Path(path).name in ("model.pt", "checkpoint.pt") and any((beside / f).is_file() for f in
                                                               ("model_card.json", "metrics.json")):
        raise CtrnasError(f"{path}: a trained model's file, not a supernet checkpoint: export the model with "
                          f"`ctrnas export --trained {beside} --out DIR`")
    ck = load_weights_file(path, "supernet checkpoint")
    if isinstance(ck, dict) and ck.get("format") == SUPERNET_FORMAT:
        from ctrnas.data.sizes import check_card_sizes

        try:
            state = ck["state_dict"]
            # the sizes the file states, checked against its own tensors before the supernet is built
            check_card_sizes(path, ck["schema"], ck["emb_dim"], ck["row_cap"], state, path)
            space_cfg = from_dict(SpaceConfig, ck["space"], source=str(path), prefix="space.")
            net = Supernet(DatasetSchema.from_json(ck["schema"]), space_cfg, emb_dim=ck["emb_dim"],
                           row_cap=ck["row_cap"])
            state, extra = ck["state_dict"], ck.get("extra", {})
        except CtrnasError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CtrnasError(f"{path}: damaged {SUPERNET_FORMAT} checkpoint: {type(e).__name__} {e}") from None
    elif isinstance(ck, dict) and ck and all(isinstance(v, torch.Tensor) for v in ck.values()):
        if schema is None or space is None:
            raise CtrnasError(f"{path}: a bare state_dict; give the dataset (schema) and space to rebuild it")
        net = Supernet(schema, space, emb_dim=emb_dim, row_cap=row_cap)
        state, extra = ck, {}
    else:
        raise CtrnasError(f"{path}: not a {SUPERNET_FORMAT} checkpoint nor a supernet state_dict")
    try:
        net.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise CtrnasError(f"{path}: weights do not fit this supernet (space, schema, emb_dim or row_cap differ): "
                          f"{first[1].strip() if len(first) > 1 else first[0]}") from None
    return net, extra
