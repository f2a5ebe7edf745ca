"""A baseline as a model folder, the same files as an exported arch's: `model.pt` (its state_dict, never a
pickled module), the serving program `model.pt2` and `model_card.json`, whose schema and build settings
rebuild the module (`load_baseline`). A run writes one when a baseline wins its final stage, `ctrnas train
--baseline` always."""

from __future__ import annotations

from pathlib import Path

from ctrnas.data.dataset import atomic_write_text
from ctrnas.errors import CtrnasError
from ctrnas.train.metrics import strict_json


def save_baseline(model, folder: Path, name: str, metrics: dict, schema=None, note: str | None = None,
                  build: dict | None = None, label: str | None = None) -> dict:
    """Write a baseline model folder: `model.pt` (its state_dict, never a pickled module), with `schema` the
    serving program `model.pt2` (ctrnas.supernet.serving), and a model card (`note`: why it is there, e.g. it
    won the run's final stage). `build` (the baseline's `dim` and `row_cap`) and the schema in the card let
    `ctrnas predict` rebuild it."""
    from ctrnas.data.dataset import versions
    from ctrnas.supernet.io import metrics_markdown
    from ctrnas.train.trainer import split_parameters

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    from ctrnas.safeload import save_weights_file

    save_weights_file(model.cpu().state_dict(), folder / "model.pt", "model weights file")
    if schema is not None:
        from ctrnas.supernet.serving import save_serving

        save_serving(model, schema, folder)
    emb, dense = split_parameters(model)
    card = {"kind": "baseline", "baseline": name, "label": label or name, "why": note, "build": build,
            "schema": schema.to_json() if schema is not None else None,
            "params_dense": sum(p.numel() for p in dense), "params_embedding": sum(p.numel() for p in emb),
            "serving": "model.pt2: torch.export.load(path).module()(dense, ids) -> probabilities" if schema else None,
            "metrics": metrics, "versions": versions()}
    atomic_write_text(folder / "model_card.md", f"# Baseline {label or name}\n\n{note or 'Trained by `ctrnas train`.'}"
                      f"\n\n- parameters: {card['params_dense']:,} dense + {card['params_embedding']:,} embedding\n\n"
                      + "\n".join(metrics_markdown(metrics)) + "\n")
    atomic_write_text(folder / "model_card.json", strict_json(card) + "\n")  # last: marks completion
    return card


def load_baseline(folder: Path):
    """A baseline model folder (model_card.json kind "baseline": a run's exported baseline, or `ctrnas train
    --baseline`), rebuilt from its card and its weights-only model.pt; None for any other folder."""
    from ctrnas.data.schema import DatasetSchema
    from ctrnas.safeload import load_weights_file, one_line, read_json
    from ctrnas.data.sizes import check_card_sizes
    from ctrnas.train.baselines import build_baseline

    card_path = Path(folder) / "model_card.json"
    if not card_path.exists() and not card_path.is_symlink():
        return None  # load_exported says what is wrong
    card = read_json(card_path, "model card")  # a FIFO, a device, damaged bytes: refused here, one line
    if not isinstance(card, dict) or card.get("kind") != "baseline":
        return None
    build = card.get("build")
    if not isinstance(build, dict) or not card.get("schema"):
        raise CtrnasError(f"{folder}: a baseline model of an older ctrnas (its card lacks the build settings): "
                          "serve its model.pt2 with torch.export.load")
    state = load_weights_file(Path(folder) / "model.pt", "model weights file", mmap=True)  # shapes, no copy yet
    check_card_sizes(card_path, card.get("schema"), build.get("dim"), build.get("row_cap"), state,
                     Path(folder) / "model.pt", dim_key="build.dim")
    try:
        model = build_baseline(str(card["baseline"]), DatasetSchema.from_json(card["schema"]), dim=build["dim"],
                               row_cap=build["row_cap"])
        model.load_state_dict(state)
    except CtrnasError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as e:
        raise CtrnasError(f"{folder}: damaged baseline model folder: {one_line(e)}") from None
    model.schema = DatasetSchema.from_json(card["schema"])
    return model
