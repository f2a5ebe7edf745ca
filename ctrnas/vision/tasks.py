"""`ctrnas vision correlate|search` as functions: NB201 cells on CIFAR images, proxies against the table."""

from __future__ import annotations

import json
from pathlib import Path


def load_images(data: str, truth: str, threads: int | None = None):
    """(x, y, num_classes) of the training images the proxies see; CIFAR-100 when the truth is cifar100."""
    import torch

    from ctrnas.vision.cifar import NUM_CLASSES, read_cifar, to_tensor

    if threads:
        torch.set_num_threads(threads)
    dataset = "cifar100" if truth == "cifar100" else "cifar10"
    x, y = to_tensor(read_cifar(data, "train", dataset), dataset)
    return x, y, NUM_CLASSES[dataset]


def correlate(data: str, table_path: str, out: str | Path, archs: int, proxies: tuple[str, ...],
              warmup: tuple[float, ...], warmup_archs: int | None, truth: str, batch_size: int, k: int, seed: int,
              n_boot: int, threads: int | None = None, device: str = "auto", workers: int = 1,
              time_limit: float | None = None) -> dict:
    """Score `archs` sampled cells (resumable scores.csv), then summary.md and scatter.png under `out`;
    returns {"text": the summary, "scores", "summary", "plot": paths}."""
    from ctrnas.device import resolve_device
    from ctrnas.vision.correlate import CorrelateConfig, format_markdown, plot_scatter, read_rows, summarize
    from ctrnas.vision.shards import run_sharded
    from ctrnas.vision.space import NB201Table

    resolved = resolve_device(device)  # resolved once here, so a bad setting fails before any worker starts

    x, y, num_classes = load_images(data, truth, threads)
    table = NB201Table.load(table_path)
    cfg = CorrelateConfig(archs=archs, proxies=tuple(proxies), warmup=tuple(warmup), warmup_archs=warmup_archs,
                          truth=truth, num_classes=num_classes, batch_size=batch_size, k=k, seed=seed)
    out = Path(out)
    csv_path = run_sharded(cfg, x, y, table, out / "scores.csv", workers, str(resolved), time_limit,
                           threads=threads or 1)
    rows = read_rows(csv_path)
    summary = summarize(rows, table, list(cfg.proxies), list(warmup), truth, n_boot=n_boot, seed=seed)
    text = format_markdown(summary)
    (out / "summary.md").write_text(text + "\n")
    plot_scatter(rows, table, list(cfg.proxies), warmup[0], truth, out / "scatter.png")
    return {"text": text, "scores": csv_path, "summary": out / "summary.md", "plot": out / "scatter.png"}


def search(data: str, table_path: str, out: str | Path, proxy: str, strategy: str, seeds: list[int],
           population: int, generations: int, tournament: int, children: int, truth: str, batch_size: int,
           k: int, seed: int, scores_csv: list[str] | None = None, threads: int | None = None, report=None,
           device: str = "auto") -> list:
    """One proxy-driven search per seed in NB201 (`report(outcome)` after each); writes search.json."""
    from ctrnas.vision.search import ProxyFitness, cache_from_csv, run_search
    from ctrnas.vision.space import NB201Table

    x, y, num_classes = load_images(data, truth, threads)
    table = NB201Table.load(table_path)
    fitness = ProxyFitness(proxy, x, y, num_classes=num_classes, batch_size=batch_size, k=k, seed=seed,
                           device=device)
    cache = cache_from_csv(scores_csv, proxy) if scores_csv else None
    outcomes = []
    for s in seeds:
        o = run_search(fitness, table, strategy=strategy, seed=s, population=population, generations=generations,
                       tournament=tournament, children=children, truth=truth, cache=cache)
        outcomes.append(o)
        if report is not None:
            report(s, o)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    return outcomes
