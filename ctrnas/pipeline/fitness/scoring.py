"""`ctrnas score`: one architecture scored by proxies exactly as the search scores it.

The candidate is the exported subnet (the supernet's slices, or fresh weights from the seed after no
warm-up), the rows are the k batches right after the warm-up rows, and SiGeo's preset follows the warm-up
recorded in the checkpoint: `ProxyFitness` does the scoring in both places, so a value printed here equals
the one a run's search history records for the same arch, seed and settings.
"""

from __future__ import annotations

from pathlib import Path

from ctrnas.errors import CtrnasError


def score_arch(data_dir, arch_path, names: list[str], options: dict[str, dict] | None = None,
               supernet: str | Path | None = None, space="nasrec-full", emb_dim: int | None = None,
               seed: int = 0, batches: int = 4, batch_size: int = 512, offset: int | None = None,
               json_path: str | Path | None = None, device: str = "cpu") -> dict:
    """{proxy name: ProxyResult} of one architecture.

    `supernet`: a warmed-up checkpoint (its recorded warm-up fraction picks the rows, SiGeo's preset and the
    weights, as in the search); None: a fresh supernet drawn from `seed` (zero-shot). `seed` is also the
    candidate's seed (fresh weights, stochastic proxies). `offset`: first training row (default: right after
    the warm-up rows). `json_path`: also write {proxy: value, terms, time_s, options} there (strict JSON).
    `device`: where the subnet and its batches are scored (auto | cpu | cuda | cuda:N)."""
    from ctrnas.pipeline.fitness.ctr_fitness import ProxyFitness, default_init, proxy_options
    from ctrnas.pipeline.data import load_rows, open_data, rows_after_warmup
    from ctrnas.pipeline.inputs import check_arch, read_arch, space_spec
    from ctrnas.proxies import get_proxy

    options = options or {}
    for n in names:  # validates names and options before any work
        get_proxy(n, **options.get(n, {}))
    from ctrnas.device import resolve_device

    where = resolve_device(device)  # an unusable device fails before any loading
    arch = read_arch(arch_path)
    data = open_data(data_dir)
    if supernet:
        from ctrnas.supernet.io import load_supernet

        # a bare state_dict (what `ctrnas warmup` wrote before it shared the run's warm-up) takes its shapes
        # from the data and --space / --emb-dim; a ctrnas-supernet/1 file carries its own
        net, extra = load_supernet(supernet, schema=data.schema, space=space_spec(space), emb_dim=emb_dim)
        fraction = (extra.get("warmup") or {}).get("fraction")  # None: warmed up elsewhere, amount unknown
    else:
        from ctrnas.supernet.io import build_supernet

        net, fraction = build_supernet(data.schema, space_spec(space), seed, emb_dim), 0.0
    check_arch(arch_path, arch, net.space)
    net = net.to(where)  # the fitness scores on its supernet's device (weights drawn on the CPU)
    need = batches * batch_size
    if offset is None:
        offset = rows_after_warmup(data, fraction or 0.0, need)[0]
    rows = load_rows(data, "train", offset, need)
    if len(rows) < need:
        raise CtrnasError(f"{data_dir}: only {len(rows) // batch_size} full batches of {batch_size} training rows "
                          f"after offset {offset}; need {batches}")
    results = {}
    for n in names:
        fitness = ProxyFitness(net, n, proxy_options(n, options.get(n), fraction), rows, batch_size, batches,
                               init=default_init(fraction))
        results[n] = fitness.proxy_result(arch, seed)
    if json_path:
        from ctrnas.pipeline.report import write_json

        write_json(Path(json_path), {n: {"value": r.value, "terms": r.terms, "time_s": r.meta["time_s"],
                                         "options": r.meta["options"]} for n, r in results.items()})
    return results
