"""Correlation harness: proxy scores of sampled NB201 cells against NB201's accuracies (SiGeo Tables 2-3).

Cells are a seeded prefix of a permutation of the 15,625, so a larger `archs` extends a smaller run.
Each (cell, warm-up level, proxy) is one row of a long CSV, appended as soon as it is scored, so an
interrupted run resumes where it stopped. Every cell starts from weights seeded by (seed, cell index), so
the warm-up levels of one cell share their initial weights.
"""

from __future__ import annotations

import csv
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ctrnas.device import configure, resolve_device
from ctrnas.errors import RecipeError
from ctrnas.seeds import derive_seed
from ctrnas.vision.cifar import batches_to, make_batches, nhwc_for
from ctrnas.vision.network import build_network
from ctrnas.vision.proxies import ONE_ROW, VISION_PROXIES, FRNorms, proxy_for
from ctrnas.vision.space import NUM_CELLS, TRUTH_COLUMNS, NB201Cell, NB201Table
from ctrnas.vision.summary import SummaryRow, format_markdown, metric_values, plot_scatter, summarize
from ctrnas.vision.warmup import WarmupConfig, warm_up

# proxies.py and summary.py were split out of this module; their names stay importable from here
__all__ = [
    "COLUMNS", "ONE_ROW", "VISION_PROXIES", "CorrelateConfig", "FRNorms", "SummaryRow", "cell_seed", "format_markdown",
    "metric_values", "plot_scatter", "proxy_for", "read_rows", "run_correlation", "sample_cells", "summarize",
    "warmup_positions",
]

COLUMNS = ["arch", "index", "position", "warmup", "proxy", "value", "terms", "time_s", "warmup_s", "truth", "accuracy"]


@dataclass(frozen=True)
class CorrelateConfig:
    """A correlation run. `warmup_archs`: how many of the cells (spread evenly) also get the warm-up levels."""

    archs: int = 300
    proxies: tuple[str, ...] = ("sigeo", "zico", "synflow", "nwot", "params")
    warmup: tuple[float, ...] = (0.0,)
    warmup_archs: int | None = None
    warmup_proxies: tuple[str, ...] | None = None
    truth: str = "cifar10"
    num_classes: int = 10
    batch_size: int = 64
    k: int = 4
    seed: int = 0
    channels_last: bool | None = None  # None: NHWC on the CPU only (several times faster there), NCHW on CUDA
    channels: int = 16  # NB201's C; smaller only for tests
    cells_per_stage: int = 5
    reverse: bool = False  # walk the sample from its last cell: a second worker on another CSV meets the first
    warmup_config: WarmupConfig = field(default_factory=WarmupConfig)

    def __post_init__(self):
        if not 1 <= self.archs <= NUM_CELLS:
            raise RecipeError("correlate", "archs", f"expected 1..{NUM_CELLS}, got {self.archs}")
        if self.truth not in TRUTH_COLUMNS:
            raise RecipeError("correlate", "truth", f"expected one of {sorted(TRUTH_COLUMNS)}, got {self.truth!r}")
        for w in self.warmup:
            if not w >= 0.0:
                raise RecipeError("correlate", "warmup", f"fractions must be >= 0 (> 1: several epochs), got {w}")


def sample_cells(archs: int, seed: int) -> list[NB201Cell]:
    """A seeded prefix of a permutation of all cells (so runs with more archs extend runs with fewer)."""
    order = np.random.default_rng(seed).permutation(NUM_CELLS)[:archs]
    return [NB201Cell.from_index(int(i)) for i in order]


def warmup_positions(archs: int, warmup_archs: int | None) -> set[int]:
    """Positions that get the warm-up levels, spread evenly so a run stopped early still has a share."""
    m = archs if warmup_archs is None else min(warmup_archs, archs)
    return {math.floor(j * archs / m) for j in range(m)} if m > 0 else set()


def cell_seed(seed: int, index: int) -> int:
    """The seed of a cell's network: derived as the CTR search derives a candidate's (`ctrnas.seeds`)."""
    return derive_seed(seed, index)


def read_rows(csv_path: str | Path) -> list[dict]:
    path = Path(csv_path)
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def run_correlation(
    config: CorrelateConfig,
    images: torch.Tensor,
    labels: torch.Tensor,
    table: NB201Table,
    csv_path: str | Path,
    progress: bool = True,
    time_limit_s: float | None = None,
    state_dir: str | Path | None = None,
    done_csvs: tuple[str | Path, ...] = (),
    device: str | torch.device = "cpu",
    shard: tuple[int, int] = (0, 1),
) -> Path:
    """Score the sampled cells and append one CSV row per (cell, level, proxy); skips rows already there.

    `state_dir`: keep each warmed-up network (`<cell index>_<level>.pt`: weights, BN buffers, warm-up
    seconds and per-step losses) so that proxies added later score the same weights without warming
    up again (the warm-up is deterministic on CPU, so this only saves time). `done_csvs`: further CSVs
    whose rows count as done (not scored again here). `device`: where networks, batches and warm-up run
    (`auto | cpu | cuda | cuda:N`); initial weights and batches are drawn on the CPU first, so every device
    starts from the same numbers. `shard=(i, n)`: only the cells at positions i, i + n, ... (one worker's
    share, see `ctrnas.vision.shards`).
    """
    from tqdm import tqdm

    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["arch"], float(r["warmup"]), r["proxy"]) for p in (csv_path, *done_csvs) for r in read_rows(p)}
    new_file = not csv_path.exists()
    dev = resolve_device(device)
    configure(dev)
    nhwc = nhwc_for(config.channels_last, dev)
    batches = batches_to(make_batches(images, labels, config.batch_size, config.k,
                                      torch.Generator().manual_seed(config.seed)), dev, nhwc)
    images, labels = images.to(dev), labels.to(dev)
    if nhwc:
        images = images.contiguous(memory_format=torch.channels_last)
    one_row = [((batches[0][0][0][:1],), batches[0][1][:1])]
    loss_fn = F.cross_entropy
    cells = sample_cells(config.archs, config.seed)
    warm_pos = warmup_positions(config.archs, config.warmup_archs)
    t_start = time.perf_counter()
    with csv_path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new_file:
            writer.writeheader()
        index, count = shard
        order = [(p, c) for p, c in enumerate(cells) if p % count == index][:: -1 if config.reverse else 1]
        for pos, cell in tqdm(order, desc="nb201 cells", unit="cell", disable=not progress):
            if time_limit_s is not None and time.perf_counter() - t_start > time_limit_s:
                break
            key, acc = cell.to_str(), table.accuracy(cell, config.truth)
            for w in config.warmup:
                if w > 0 and pos not in warm_pos:
                    continue
                names = config.proxies if w == 0 or config.warmup_proxies is None else config.warmup_proxies
                todo = [p for p in names if (key, float(w), p) not in done]
                if not todo:
                    continue
                s = cell_seed(config.seed, cell.index)
                model = build_network(cell, config.num_classes, seed=s, channels=config.channels,
                                      cells_per_stage=config.cells_per_stage).to(dev)
                if nhwc:
                    model = model.to(memory_format=torch.channels_last)
                warm_s = 0.0
                if w > 0:
                    state = Path(state_dir) / f"{cell.index}_{w:g}.pt" if state_dir is not None else None
                    warm_s = _warm(model, images, labels, w, s, config.warmup_config, state, dev)
                for name in todo:
                    r = proxy_for(name, w).score(model, one_row if name in ONE_ROW else batches, loss_fn)
                    writer.writerow({
                        "arch": key, "index": cell.index, "position": pos, "warmup": w, "proxy": name,
                        "value": repr(r.value), "terms": json.dumps(r.terms), "time_s": f"{r.meta['time_s']:.4f}",
                        "warmup_s": f"{warm_s:.4f}", "truth": config.truth, "accuracy": acc,
                    })
                    f.flush()
    return csv_path


def _warm(model, images, labels, fraction: float, seed: int, cfg: WarmupConfig, state: Path | None, dev) -> float:
    """Warm `model` up by `fraction` (or load the weights `state` kept from an earlier run); its seconds."""
    if state is not None and state.exists():
        from ctrnas.errors import CtrnasError
        from ctrnas.safeload import load_weights_file

        saved = load_weights_file(state, "warmed-up network")  # CPU tensors; load_state_dict copies them over
        try:
            model.load_state_dict(saved["model"])
            return float(saved["warmup_s"])
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise CtrnasError(f"{state}: damaged warmed-up network ({type(e).__name__}); delete it to warm up "
                              "again") from None
    t0 = time.perf_counter()
    losses = warm_up(model, images, labels, fraction, torch.Generator().manual_seed(seed + 1), cfg)
    warm_s = time.perf_counter() - t0
    if state is not None:
        state.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "warmup_s": warm_s, "losses": losses}, state.with_suffix(".tmp"))
        state.with_suffix(".tmp").replace(state)
    return warm_s
